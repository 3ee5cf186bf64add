"""The pure views: a snapshot (or the part of it they show) in, rows and styled text parts
out, with no Textual and no Rich. The dashboard draws them and ``--once`` prints them, so
they sit below both consumers and belong to neither."""
