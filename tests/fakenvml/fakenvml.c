/*
 * A fake libnvidia-ml.so.1 for tests: the real pynvml (and nvitop) run against it.
 *
 * Compiled against NVIDIA's own nvml.h (from the nvidia-nvml-dev wheel), so the compiler
 * checks every prototype. The functions below are the ones the fake implements; every
 * other function nvml.h declares comes from the generated weak stubs (gen_stubs.py) and
 * answers NVML_ERROR_NOT_SUPPORTED.
 *
 * The machine it pretends to be is described by a text file whose path is read from the
 * environment variable FAKE_NVML_SCENARIO at nvmlInit. The file is re-read whenever it
 * changes (checked with stat() on every call), so a test can make a GPU fall off the bus
 * while a program runs. The format is documented in tests/fakenvml/__init__.py.
 *
 * Driver profiles (tests/fakenvml/__init__.py, PROFILES): the same source is built once per
 * profile; a linker version script hides the symbols an older driver lacks (pynvml then
 * raises FunctionNotFound, as with a real old libnvidia-ml.so.1), and
 * -DFAKE_V3_LEGACY_STRIDE makes the _v3 process calls fill 32-byte entries, the layout of
 * drivers 535.43-535.86 (pid, usedGpuMemory, gpuInstanceId, computeInstanceId,
 * usedGpuCcProtectedMemory) where nvml.h's nvmlProcessInfo_t is 24 bytes.
 *
 * MIG: "migdev" lines give a GPU MIG devices; their handles answer name, UUID, memory, the
 * GPU/compute instance ids, the parent handle and the processes of their instance.
 *
 * Thread safety: one mutex guards the scenario; injected sleeps happen outside it, so
 * concurrent calls (e.g. PCIe throughput on many GPUs from a thread pool) overlap.
 */
#define _GNU_SOURCE
#define NVML_NO_UNVERSIONED_FUNC_DEFS
#include "nvml.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_GPUS 64
#define MAX_RULES 64
#define RULE_NAME 96
#define MAX_MIG 8
#define MAX_GPM 32 /* GPM metrics a scenario GPU can give */
#define MAX_FIELD_ERRS 8 /* field_err lines a scenario GPU can have */
#define PCIE_COUNTERS_SINCE 555 /* the driver branch that added fields 197/198 */
#define MAX_LINKS NVML_NVLINK_MAX_LINKS
#define UNSET (-1LL) /* a metric written as "-": the call answers NOT_SUPPORTED */

typedef struct {
    char name[RULE_NAME];
    long long value; /* nvmlReturn_t for "err", milliseconds for "sleep" */
} rule_t;

typedef struct {
    unsigned int pid;
    unsigned long long used; /* bytes, or NVML_VALUE_NOT_AVAILABLE as unsigned */
    unsigned int gi, ci;
    unsigned long long cc; /* usedGpuCcProtectedMemory (only the legacy _v3 layout has it) */
} proc_t;

typedef struct {
    int present;
    unsigned int gi, ci;
    char profile[32];             /* e.g. 1g.10gb */
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    long long mem_total, mem_used; /* bytes */
} migdev_t;

typedef struct {
    unsigned int pid;
    long long ts; /* microseconds; negative: that long before the call (always fresh) */
    unsigned int sm, mem, enc, dec;
} psample_t;

typedef struct {
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    char bus_id[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
    long long minor;
    long long mem_total, mem_used, mem_free, mem_reserved; /* v2 meaning: used excludes reserved */
    long long util_gpu, util_mem;
    long long temp;
    long long power_mw, power_limit_mw;
    long long fan;
    long long pstate;
    long long clk_sm, clk_mem, clk_sm_max, clk_mem_max;
    int has_reasons;
    unsigned long long reasons;
    long long pcie_gen, pcie_width, pcie_max_gen, pcie_max_width;
    long long pcie_tx, pcie_rx; /* KB/s */
    long long enc, dec;
    long long mig_cur, mig_pending;
    long long ecc_volatile, ecc_aggregate;
    migdev_t migs[MAX_MIG];
    proc_t *cprocs;
    unsigned int ncprocs, capcprocs;
    proc_t *gprocs;
    unsigned int ngprocs, capgprocs;
    psample_t *samples;
    unsigned int nsamples, capsamples;
    /* GPM: -1 the support query answers NOT_SUPPORTED (a driver before GPM), else
     * isSupportedDevice; a metric not listed answers NOT_SUPPORTED in its slot */
    int gpm_support;
    unsigned int gpm_slots; /* numMetrics above it: INVALID_ARGUMENT (0: the header's max) */
    unsigned int ngpm;
    unsigned int gpm_ids[MAX_GPM];
    double gpm_vals[MAX_GPM];
    int gpm_set[MAX_GPM]; /* 0: "-", NOT_SUPPORTED in its slot */
    /* NVLink: links 0..nlinks-1 (past them: INVALID_ARGUMENT; none: NOT_SUPPORTED) */
    long long nvl_version; /* nvmlNvLinkVersion_t */
    unsigned int nlinks;
    int link_active[MAX_LINKS];
    int link_type[MAX_LINKS]; /* nvmlIntNvLinkDeviceType_t of the far end */
    char link_bus[MAX_LINKS][NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
    int has_nvl_kib; /* the throughput fields 138/139 answer */
    unsigned long long nvl_tx, nvl_rx;       /* cumulative KiB */
    unsigned long long nvl_tx_step, nvl_rx_step; /* KiB added at each nvmlDeviceGetFieldValues */
    /* PCIe bytes (fields 197/198, drivers 555+), grown by pcie_kbps x 1024 at each call */
    unsigned long long pcie_tx_count, pcie_rx_count;
    unsigned int nfield_errs;
    unsigned int field_err_ids[MAX_FIELD_ERRS];
    int field_err_codes[MAX_FIELD_ERRS]; /* what that field's entry answers */
    rule_t errs[MAX_RULES];
    unsigned int nerrs;
    rule_t sleeps[MAX_RULES];
    unsigned int nsleeps;
} gpu_t;

typedef struct {
    char driver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    char nvml[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE];
    int cuda;
    int init_ret;
    rule_t errs[MAX_RULES];
    unsigned int nerrs;
    rule_t sleeps[MAX_RULES];
    unsigned int nsleeps;
    gpu_t gpus[MAX_GPUS];
    unsigned int ngpus;
} scenario_t;

struct nvmlDevice_st {
    unsigned int index;
    int mig; /* -1: a whole GPU; else the MIG device slot on GPU `index` */
};

static struct nvmlDevice_st g_handles[MAX_GPUS];
static struct nvmlDevice_st g_mig_handles[MAX_GPUS * MAX_MIG];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static scenario_t *g_sc = NULL;
static int g_init_count = 0;
static char g_path[4096];
static struct stat g_stat;

/* ---------------------------------------------------------------- scenario parsing */

static void free_scenario(scenario_t *sc)
{
    if (sc == NULL)
        return;
    for (unsigned int i = 0; i < sc->ngpus; i++) {
        free(sc->gpus[i].cprocs);
        free(sc->gpus[i].gprocs);
        free(sc->gpus[i].samples);
    }
    munmap(sc, sizeof(*sc));
}

static long long parse_num(const char *tok)
{
    if (tok == NULL || strcmp(tok, "-") == 0)
        return UNSET;
    return strtoll(tok, NULL, 0);
}

/* A counter's value: the whole unsigned 64-bit range ("-" or none: 0). */
static unsigned long long parse_u64(const char *tok)
{
    if (tok == NULL || strcmp(tok, "-") == 0)
        return 0ULL;
    return strtoull(tok, NULL, 0);
}

static void copy_str(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static void copy_hex(char *dst, size_t cap, const char *hex)
{
    size_t n = 0;
    while (hex[0] && hex[1] && n + 1 < cap) {
        int hi = hexval(hex[0]), lo = hexval(hex[1]);
        if (hi < 0 || lo < 0)
            break;
        dst[n++] = (char)(hi * 16 + lo);
        hex += 2;
    }
    dst[n] = '\0';
}

static int add_rule(rule_t *rules, unsigned int *n, const char *name, long long value)
{
    if (*n >= MAX_RULES || name == NULL)
        return -1;
    copy_str(rules[*n].name, RULE_NAME, name);
    rules[*n].value = value;
    (*n)++;
    return 0;
}

static int grow(void **arr, unsigned int *cap, unsigned int need, size_t elem)
{
    if (need <= *cap)
        return 0;
    unsigned int ncap = *cap ? *cap * 2 : 16;
    while (ncap < need)
        ncap *= 2;
    void *p = realloc(*arr, (size_t)ncap * elem);
    if (p == NULL)
        return -1;
    *arr = p;
    *cap = ncap;
    return 0;
}

static void init_gpu(gpu_t *g, unsigned int index)
{
    memset(g, 0, sizeof(*g));
    snprintf(g->name, sizeof(g->name), "NVIDIA Fake GPU");
    snprintf(g->uuid, sizeof(g->uuid), "GPU-fa4e0000-0000-0000-0000-%012x", index);
    snprintf(g->bus_id, sizeof(g->bus_id), "00000000:%02X:00.0", (index + 1) & 0xff);
    g->minor = index;
    g->mem_total = g->mem_used = g->mem_free = g->mem_reserved = UNSET;
    g->util_gpu = g->util_mem = g->temp = UNSET;
    g->power_mw = g->power_limit_mw = g->fan = g->pstate = UNSET;
    g->clk_sm = g->clk_mem = g->clk_sm_max = g->clk_mem_max = UNSET;
    g->pcie_gen = g->pcie_width = g->pcie_max_gen = g->pcie_max_width = UNSET;
    g->pcie_tx = g->pcie_rx = g->enc = g->dec = UNSET;
    g->mig_cur = g->mig_pending = g->ecc_volatile = g->ecc_aggregate = UNSET;
    g->gpm_support = -1;
    g->nvl_version = UNSET;
}

#define TOK() strtok_r(NULL, " \t\r\n", &save)

/* Returns NULL and prints the reason on a malformed file. */
static scenario_t *load_scenario(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "fakenvml: cannot open scenario %s: %s\n", path, strerror(errno));
        return NULL;
    }
    /* Mapped, not malloc'd: a real driver parses nothing per call, and a scenario (about 1
     * MiB with its 64 GPU slots) re-read on whichever thread calls first would leave a free chunk of
     * its size in each thread's malloc arena (glibc raises its mmap threshold after the
     * first free): megabytes of the process's RSS that are the fake's, not gputop's. */
    scenario_t *sc = mmap(NULL, sizeof(*sc), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                          -1, 0);
    if (sc == MAP_FAILED) {
        fclose(f);
        return NULL;
    }
    copy_str(sc->driver, sizeof(sc->driver), "550.54.15");
    copy_str(sc->nvml, sizeof(sc->nvml), "12.550.54.15");
    sc->cuda = 12040;

    char *line = NULL;
    size_t cap = 0;
    unsigned int lineno = 0;
    gpu_t *g = NULL;
    int ok = 1;
    while (ok && getline(&line, &cap, f) >= 0) {
        lineno++;
        char *save = NULL;
        char *raw = line;
        while (*raw == ' ' || *raw == '\t')
            raw++;
        /* the rest of the line after the first word, for free text (names) */
        char rest[512];
        const char *r = raw + strcspn(raw, " \t\r\n");
        while (*r == ' ' || *r == '\t')
            r++;
        copy_str(rest, sizeof(rest), r);
        rest[strcspn(rest, "\r\n")] = '\0';
        char *key = strtok_r(line, " \t\r\n", &save);
        if (key == NULL || key[0] == '#')
            continue;

        rule_t *errs = g ? g->errs : sc->errs;
        unsigned int *nerrs = g ? &g->nerrs : &sc->nerrs;
        rule_t *sleeps = g ? g->sleeps : sc->sleeps;
        unsigned int *nsleeps = g ? &g->nsleeps : &sc->nsleeps;

        if (strcmp(key, "version") == 0) {
            /* format version: 1 */
        } else if (strcmp(key, "driver") == 0) {
            char *v = TOK();
            copy_str(sc->driver, sizeof(sc->driver), v ? v : "");
        } else if (strcmp(key, "nvml") == 0) {
            char *v = TOK();
            copy_str(sc->nvml, sizeof(sc->nvml), v ? v : "");
        } else if (strcmp(key, "cuda") == 0) {
            sc->cuda = (int)parse_num(TOK());
        } else if (strcmp(key, "init") == 0) {
            sc->init_ret = (int)parse_num(TOK());
        } else if (strcmp(key, "err") == 0) {
            char *name = TOK();
            if (add_rule(errs, nerrs, name, parse_num(TOK())) != 0)
                ok = 0;
        } else if (strcmp(key, "sleep") == 0) {
            char *name = TOK();
            if (add_rule(sleeps, nsleeps, name, parse_num(TOK())) != 0)
                ok = 0;
        } else if (strcmp(key, "gpu") == 0) {
            if (sc->ngpus >= MAX_GPUS) {
                ok = 0;
                break;
            }
            g = &sc->gpus[sc->ngpus];
            init_gpu(g, sc->ngpus);
            sc->ngpus++;
        } else if (g == NULL) {
            ok = 0;
        } else if (strcmp(key, "name") == 0) {
            copy_str(g->name, sizeof(g->name), rest);
        } else if (strcmp(key, "name_hex") == 0) {
            copy_hex(g->name, sizeof(g->name), rest);
        } else if (strcmp(key, "uuid") == 0) {
            char *v = TOK();
            copy_str(g->uuid, sizeof(g->uuid), v ? v : "");
        } else if (strcmp(key, "bus_id") == 0) {
            char *v = TOK();
            copy_str(g->bus_id, sizeof(g->bus_id), v ? v : "");
        } else if (strcmp(key, "minor") == 0) {
            g->minor = parse_num(TOK());
        } else if (strcmp(key, "memory") == 0) {
            g->mem_total = parse_num(TOK());
            g->mem_used = parse_num(TOK());
            g->mem_free = parse_num(TOK());
            g->mem_reserved = parse_num(TOK());
        } else if (strcmp(key, "util") == 0) {
            g->util_gpu = parse_num(TOK());
            g->util_mem = parse_num(TOK());
        } else if (strcmp(key, "temp") == 0) {
            g->temp = parse_num(TOK());
        } else if (strcmp(key, "power") == 0) {
            g->power_mw = parse_num(TOK());
            g->power_limit_mw = parse_num(TOK());
        } else if (strcmp(key, "fan") == 0) {
            g->fan = parse_num(TOK());
        } else if (strcmp(key, "pstate") == 0) {
            g->pstate = parse_num(TOK());
        } else if (strcmp(key, "clocks") == 0) {
            g->clk_sm = parse_num(TOK());
            g->clk_mem = parse_num(TOK());
            g->clk_sm_max = parse_num(TOK());
            g->clk_mem_max = parse_num(TOK());
        } else if (strcmp(key, "reasons") == 0) {
            char *v = TOK();
            g->has_reasons = v != NULL && strcmp(v, "-") != 0;
            g->reasons = g->has_reasons ? strtoull(v, NULL, 0) : 0;
        } else if (strcmp(key, "pcie") == 0) {
            g->pcie_gen = parse_num(TOK());
            g->pcie_width = parse_num(TOK());
            g->pcie_max_gen = parse_num(TOK());
            g->pcie_max_width = parse_num(TOK());
        } else if (strcmp(key, "pcie_kbps") == 0) {
            g->pcie_tx = parse_num(TOK());
            g->pcie_rx = parse_num(TOK());
        } else if (strcmp(key, "codec") == 0) {
            g->enc = parse_num(TOK());
            g->dec = parse_num(TOK());
        } else if (strcmp(key, "mig") == 0) {
            g->mig_cur = parse_num(TOK());
            g->mig_pending = parse_num(TOK());
        } else if (strcmp(key, "ecc") == 0) {
            g->ecc_volatile = parse_num(TOK());
            g->ecc_aggregate = parse_num(TOK());
        } else if (strcmp(key, "proc") == 0) {
            char *type = TOK();
            proc_t p;
            p.pid = (unsigned int)parse_num(TOK());
            long long used = parse_num(TOK());
            p.used = (unsigned long long)used; /* -1 -> NVML_VALUE_NOT_AVAILABLE */
            long long gi = parse_num(TOK()), ci = parse_num(TOK());
            p.gi = gi == UNSET ? 0xFFFFFFFFu : (unsigned int)gi;
            p.ci = ci == UNSET ? 0xFFFFFFFFu : (unsigned int)ci;
            long long cc = parse_num(TOK());
            p.cc = cc == UNSET ? 0ULL : (unsigned long long)cc;
            if (type == NULL) {
                ok = 0;
            } else if (strchr(type, 'C') != NULL) {
                if (grow((void **)&g->cprocs, &g->capcprocs, g->ncprocs + 1, sizeof(proc_t)))
                    ok = 0;
                else
                    g->cprocs[g->ncprocs++] = p;
            }
            if (ok && type != NULL && strchr(type, 'G') != NULL) {
                if (grow((void **)&g->gprocs, &g->capgprocs, g->ngprocs + 1, sizeof(proc_t)))
                    ok = 0;
                else
                    g->gprocs[g->ngprocs++] = p;
            }
        } else if (strcmp(key, "migdev") == 0) {
            long long slot = parse_num(TOK());
            if (slot < 0 || slot >= MAX_MIG) {
                ok = 0;
            } else {
                migdev_t *m = &g->migs[slot];
                m->present = 1;
                m->gi = (unsigned int)parse_num(TOK());
                m->ci = (unsigned int)parse_num(TOK());
                char *prof = TOK();
                copy_str(m->profile, sizeof(m->profile), prof ? prof : "?");
                m->mem_total = parse_num(TOK());
                m->mem_used = parse_num(TOK());
                char *uuid = TOK();
                if (uuid != NULL)
                    copy_str(m->uuid, sizeof(m->uuid), uuid);
                else
                    snprintf(m->uuid, sizeof(m->uuid), "MIG-fa4e%04x-0000-4000-8000-%012llx",
                             sc->ngpus - 1, slot);
            }
        } else if (strcmp(key, "gpm") == 0) {
            g->gpm_support = (int)parse_num(TOK());
            long long slots = parse_num(TOK());
            g->gpm_slots = slots == UNSET ? 0u : (unsigned int)slots;
        } else if (strcmp(key, "gpm_metric") == 0) {
            char *id = TOK(), *value = TOK();
            if (id == NULL || value == NULL || g->ngpm >= MAX_GPM) {
                ok = 0;
            } else {
                g->gpm_ids[g->ngpm] = (unsigned int)parse_num(id);
                g->gpm_set[g->ngpm] = strcmp(value, "-") != 0;
                g->gpm_vals[g->ngpm] = g->gpm_set[g->ngpm] ? strtod(value, NULL) : 0.0;
                g->ngpm++;
            }
        } else if (strcmp(key, "nvlink_version") == 0) {
            g->nvl_version = parse_num(TOK());
        } else if (strcmp(key, "nvlink") == 0) {
            long long link = parse_num(TOK());
            if (link < 0 || link >= MAX_LINKS) {
                ok = 0;
            } else {
                g->link_active[link] = (int)parse_num(TOK());
                char *bus = TOK();
                copy_str(g->link_bus[link], sizeof(g->link_bus[link]), bus ? bus : "");
                g->link_type[link] = (int)parse_num(TOK());
                if ((unsigned int)link + 1 > g->nlinks)
                    g->nlinks = (unsigned int)link + 1;
            }
        } else if (strcmp(key, "nvlink_kib") == 0) {
            g->has_nvl_kib = 1;
            g->nvl_tx_step = (unsigned long long)parse_num(TOK());
            g->nvl_rx_step = (unsigned long long)parse_num(TOK());
            long long tx = parse_num(TOK()), rx = parse_num(TOK());
            g->nvl_tx = tx == UNSET ? 0ULL : (unsigned long long)tx;
            g->nvl_rx = rx == UNSET ? 0ULL : (unsigned long long)rx;
        } else if (strcmp(key, "pcie_count") == 0) {
            g->pcie_tx_count = parse_u64(TOK());
            g->pcie_rx_count = parse_u64(TOK());
        } else if (strcmp(key, "field_err") == 0) {
            char *id = TOK(), *ret = TOK();
            if (id == NULL || ret == NULL || g->nfield_errs >= MAX_FIELD_ERRS) {
                ok = 0;
            } else {
                g->field_err_ids[g->nfield_errs] = (unsigned int)parse_num(id);
                g->field_err_codes[g->nfield_errs] = (int)parse_num(ret);
                g->nfield_errs++;
            }
        } else if (strcmp(key, "sample") == 0) {
            psample_t s;
            s.pid = (unsigned int)parse_num(TOK());
            s.ts = parse_num(TOK());
            s.sm = (unsigned int)parse_num(TOK());
            s.mem = (unsigned int)parse_num(TOK());
            s.enc = (unsigned int)parse_num(TOK());
            s.dec = (unsigned int)parse_num(TOK());
            if (grow((void **)&g->samples, &g->capsamples, g->nsamples + 1, sizeof(psample_t)))
                ok = 0;
            else
                g->samples[g->nsamples++] = s;
        } else {
            ok = 0;
        }
        if (!ok)
            fprintf(stderr, "fakenvml: %s:%u: cannot use line starting with '%s'\n", path, lineno,
                    key);
    }
    free(line);
    fclose(f);
    if (!ok) {
        free_scenario(sc);
        return NULL;
    }
    return sc;
}

/* Called with g_lock held: re-reads the scenario when the file changed. */
static void maybe_reload(void)
{
    struct stat st;
    if (g_path[0] == '\0' || stat(g_path, &st) != 0)
        return;
    if (st.st_ino == g_stat.st_ino && st.st_dev == g_stat.st_dev && st.st_size == g_stat.st_size &&
        st.st_mtim.tv_sec == g_stat.st_mtim.tv_sec && st.st_mtim.tv_nsec == g_stat.st_mtim.tv_nsec)
        return;
    scenario_t *sc = load_scenario(g_path);
    if (sc == NULL)
        return; /* keep the previous one; the reason went to stderr */
    free_scenario(g_sc);
    g_sc = sc;
    g_stat = st;
}

/* ---------------------------------------------------------------- call plumbing */

/* How well a rule name matches a symbol: 3 exact, 2 same without _vN suffix, 1 "*", 0 no. */
static int rule_score(const char *rule, const char *sym)
{
    if (strcmp(rule, sym) == 0)
        return 3;
    if (strcmp(rule, "*") == 0)
        return 1;
    const char *v = strrchr(sym, '_');
    if (v != NULL && v[1] == 'v' && v[2] >= '0' && v[2] <= '9') {
        size_t n = (size_t)(v - sym);
        if (strlen(rule) == n && strncmp(rule, sym, n) == 0)
            return 2;
    }
    return 0;
}

static int find_rule(const rule_t *rules, unsigned int n, const char *sym, long long *value)
{
    int best = 0;
    for (unsigned int i = 0; i < n; i++) {
        int s = rule_score(rules[i].name, sym);
        if (s > 0 && s >= best) {
            best = s;
            *value = rules[i].value;
        }
    }
    return best;
}

/* Per-GPU rules first, then global ones. */
static int lookup(const gpu_t *g, int want_err, const char *sym, long long *value)
{
    if (g != NULL && find_rule(want_err ? g->errs : g->sleeps, want_err ? g->nerrs : g->nsleeps,
                               sym, value))
        return 1;
    return find_rule(want_err ? g_sc->errs : g_sc->sleeps, want_err ? g_sc->nerrs : g_sc->nsleeps,
                     sym, value) > 0;
}

/*
 * Every implemented call starts with enter() and ends with leave().
 * enter() takes the lock, reloads the scenario if it changed, resolves the device (index -1:
 * a system call) and applies injected errors. The lock stays held until leave(), which
 * releases it and then sleeps for the injected delay.
 */
static nvmlReturn_t enter(const char *sym, int index, gpu_t **gpu, unsigned int *sleep_ms)
{
    pthread_mutex_lock(&g_lock);
    *sleep_ms = 0;
    *gpu = NULL;
    if (g_init_count <= 0 || g_sc == NULL)
        return NVML_ERROR_UNINITIALIZED;
    maybe_reload();
    gpu_t *g = NULL;
    if (index >= 0) {
        if ((unsigned int)index >= g_sc->ngpus)
            return NVML_ERROR_INVALID_ARGUMENT;
        g = &g_sc->gpus[index];
    }
    long long v = 0;
    if (lookup(g, 0, sym, &v) && v > 0)
        *sleep_ms = (unsigned int)v;
    if (lookup(g, 1, sym, &v) && v != 0)
        return (nvmlReturn_t)v;
    *gpu = g;
    return NVML_SUCCESS;
}

static nvmlReturn_t leave(nvmlReturn_t ret, unsigned int sleep_ms)
{
    pthread_mutex_unlock(&g_lock);
    if (sleep_ms > 0) {
        struct timespec ts = {sleep_ms / 1000, (long)(sleep_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    return ret;
}

static int is_mig_handle(nvmlDevice_t device)
{
    return device >= &g_mig_handles[0] && device < &g_mig_handles[MAX_GPUS * MAX_MIG];
}

static int dev_index(nvmlDevice_t device)
{
    if (is_mig_handle(device))
        return (int)device->index;
    if (device < &g_handles[0] || device >= &g_handles[MAX_GPUS])
        return MAX_GPUS; /* resolves to INVALID_ARGUMENT */
    return (int)device->index;
}

/* The MIG device a handle names (NULL: a whole GPU, or a slot the scenario no longer has). */
static const migdev_t *mig_of(const gpu_t *g, nvmlDevice_t device)
{
    if (!is_mig_handle(device) || device->mig < 0 || device->mig >= MAX_MIG)
        return NULL;
    return g->migs[device->mig].present ? &g->migs[device->mig] : NULL;
}

/* A call on a whole GPU: on a MIG device handle it answers NOT_SUPPORTED (like most
 * metrics on real MIG handles). MIG_CALL also accepts MIG handles (mig != NULL). */
#define MIG_CALL(sym)                                                                              \
    gpu_t *g;                                                                                      \
    unsigned int sleep_ms_;                                                                        \
    nvmlReturn_t r_ = enter(sym, dev_index(device), &g, &sleep_ms_);                               \
    if (r_ != NVML_SUCCESS)                                                                        \
        return leave(r_, sleep_ms_);                                                               \
    const migdev_t *mig = mig_of(g, device);                                                       \
    if (is_mig_handle(device) && mig == NULL)                                                      \
        return leave(NVML_ERROR_INVALID_ARGUMENT, sleep_ms_);

#define DEV_CALL(sym)                                                                              \
    MIG_CALL(sym)                                                                                  \
    if (mig != NULL)                                                                               \
        return leave(NVML_ERROR_NOT_SUPPORTED, sleep_ms_);

#define SYS_CALL(sym)                                                                              \
    gpu_t *g;                                                                                      \
    unsigned int sleep_ms_;                                                                        \
    nvmlReturn_t r_ = enter(sym, -1, &g, &sleep_ms_);                                              \
    (void)g;                                                                                       \
    if (r_ != NVML_SUCCESS)                                                                        \
        return leave(r_, sleep_ms_);

#define DONE(ret) return leave((ret), sleep_ms_)

/* One unsigned value that may be "-" (not supported). */
#define UINT_METRIC(sym, field, out)                                                               \
    DEV_CALL(sym)                                                                                  \
    if ((out) == NULL)                                                                             \
        DONE(NVML_ERROR_INVALID_ARGUMENT);                                                         \
    if (g->field == UNSET)                                                                         \
        DONE(NVML_ERROR_NOT_SUPPORTED);                                                            \
    *(out) = (unsigned int)g->field;                                                               \
    DONE(NVML_SUCCESS)

static nvmlReturn_t put_str(char *dst, unsigned int length, const char *src)
{
    if (dst == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, strlen(src) + 1);
    return NVML_SUCCESS;
}

/* ---------------------------------------------------------------- init / system */

/* FAKE_NVML_LOG=path: append "<call> <nvmlReturn_t> <pid>" for every init and shutdown,
 * so a test can check that a program shut NVML down on its way out. One write() per
 * line on an O_APPEND descriptor: lines from several processes never interleave. */
static void log_call(const char *call, nvmlReturn_t ret)
{
    const char *path = getenv("FAKE_NVML_LOG");
    if (path == NULL || path[0] == '\0')
        return;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    char line[128];
    int n = snprintf(line, sizeof(line), "%s %d %ld\n", call, (int)ret, (long)getpid());
    if (n > 0 && write(fd, line, (size_t)n) < 0) {
        /* nothing to do: the log is best effort */
    }
    close(fd);
}

static nvmlReturn_t do_init_inner(void);

static nvmlReturn_t do_init(void)
{
    nvmlReturn_t ret = do_init_inner();
    log_call("nvmlInit", ret);
    return ret;
}

static nvmlReturn_t do_init_inner(void)
{
    pthread_mutex_lock(&g_lock);
    const char *path = getenv("FAKE_NVML_SCENARIO");
    if (path == NULL || path[0] == '\0') {
        pthread_mutex_unlock(&g_lock);
        return NVML_ERROR_DRIVER_NOT_LOADED; /* no scenario: a machine without a driver */
    }
    copy_str(g_path, sizeof(g_path), path);
    struct stat st;
    scenario_t *sc = stat(g_path, &st) == 0 ? load_scenario(g_path) : NULL;
    if (sc == NULL) {
        if (errno == ENOENT)
            fprintf(stderr, "fakenvml: scenario %s not found\n", g_path);
        pthread_mutex_unlock(&g_lock);
        return NVML_ERROR_UNKNOWN;
    }
    free_scenario(g_sc);
    g_sc = sc;
    g_stat = st;
    nvmlReturn_t ret = (nvmlReturn_t)sc->init_ret;
    long long ms = 0;
    find_rule(sc->sleeps, sc->nsleeps, "nvmlInit", &ms);
    if (ret == NVML_SUCCESS)
        g_init_count++;
    pthread_mutex_unlock(&g_lock);
    if (ms > 0) {
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    return ret;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags;
    return do_init();
}

nvmlReturn_t nvmlInit_v2(void) { return do_init(); }

nvmlReturn_t nvmlInit(void) { return do_init(); }

nvmlReturn_t nvmlShutdown(void)
{
    pthread_mutex_lock(&g_lock);
    nvmlReturn_t ret = NVML_SUCCESS;
    if (g_init_count <= 0)
        ret = NVML_ERROR_UNINITIALIZED;
    else
        g_init_count--;
    pthread_mutex_unlock(&g_lock);
    log_call("nvmlShutdown", ret);
    return ret;
}

const char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_IRQ_ISSUE: return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM: return "The operating system has blocked the request.";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_NO_DATA: return "No data";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    case NVML_ERROR_UNKNOWN: return "Unknown Error";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    SYS_CALL("nvmlSystemGetDriverVersion")
    DONE(put_str(version, length, g_sc->driver));
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    SYS_CALL("nvmlSystemGetNVMLVersion")
    DONE(put_str(version, length, g_sc->nvml));
}

static nvmlReturn_t cuda_version(const char *sym, int *cudaDriverVersion)
{
    SYS_CALL(sym)
    if (cudaDriverVersion == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    *cudaDriverVersion = g_sc->cuda;
    DONE(NVML_SUCCESS);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
    return cuda_version("nvmlSystemGetCudaDriverVersion", cudaDriverVersion);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
    return cuda_version("nvmlSystemGetCudaDriverVersion_v2", cudaDriverVersion);
}

/* ---------------------------------------------------------------- device handles */

static nvmlReturn_t device_count(const char *sym, unsigned int *deviceCount)
{
    SYS_CALL(sym)
    if (deviceCount == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    *deviceCount = g_sc->ngpus;
    DONE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    return device_count("nvmlDeviceGetCount_v2", deviceCount);
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount)
{
    return device_count("nvmlDeviceGetCount", deviceCount);
}

static nvmlReturn_t handle_by_index(const char *sym, unsigned int index, nvmlDevice_t *device)
{
    gpu_t *g;
    unsigned int sleep_ms_;
    nvmlReturn_t r_ = enter(sym, index >= MAX_GPUS ? MAX_GPUS : (int)index, &g, &sleep_ms_);
    if (r_ != NVML_SUCCESS)
        return leave(r_, sleep_ms_);
    if (device == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    g_handles[index].index = index;
    g_handles[index].mig = -1;
    *device = &g_handles[index];
    DONE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    return handle_by_index("nvmlDeviceGetHandleByIndex_v2", index, device);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return handle_by_index("nvmlDeviceGetHandleByIndex", index, device);
}

static nvmlReturn_t handle_by_string(const char *sym, const char *key, int by_uuid,
                                     nvmlDevice_t *device)
{
    SYS_CALL(sym)
    if (key == NULL || device == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    for (unsigned int i = 0; i < g_sc->ngpus; i++) {
        const char *v = by_uuid ? g_sc->gpus[i].uuid : g_sc->gpus[i].bus_id;
        if (strcasecmp(v, key) == 0) {
            g_handles[i].index = i;
            g_handles[i].mig = -1;
            *device = &g_handles[i];
            DONE(NVML_SUCCESS);
        }
        for (unsigned int k = 0; by_uuid && k < MAX_MIG; k++) {
            if (!g_sc->gpus[i].migs[k].present || strcasecmp(g_sc->gpus[i].migs[k].uuid, key))
                continue;
            g_mig_handles[i * MAX_MIG + k].index = i;
            g_mig_handles[i * MAX_MIG + k].mig = (int)k;
            *device = &g_mig_handles[i * MAX_MIG + k];
            DONE(NVML_SUCCESS);
        }
    }
    DONE(NVML_ERROR_NOT_FOUND);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    return handle_by_string("nvmlDeviceGetHandleByUUID", uuid, 1, device);
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
    return handle_by_string("nvmlDeviceGetHandleByPciBusId_v2", pciBusId, 0, device);
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device)
{
    return handle_by_string("nvmlDeviceGetHandleByPciBusId", pciBusId, 0, device);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    DEV_CALL("nvmlDeviceGetIndex")
    if (index == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    *index = device->index;
    DONE(NVML_SUCCESS);
}

/* ---------------------------------------------------------------- identity */

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    MIG_CALL("nvmlDeviceGetName")
    if (mig != NULL) {
        char full[NVML_DEVICE_NAME_V2_BUFFER_SIZE + 40];
        snprintf(full, sizeof(full), "%s MIG %s", g->name, mig->profile);
        full[NVML_DEVICE_NAME_V2_BUFFER_SIZE - 1] = '\0';
        DONE(put_str(name, length, full));
    }
    DONE(put_str(name, length, g->name));
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    MIG_CALL("nvmlDeviceGetUUID")
    DONE(put_str(uuid, length, mig != NULL ? mig->uuid : g->uuid));
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber)
{
    UINT_METRIC("nvmlDeviceGetMinorNumber", minor, minorNumber);
}

static nvmlReturn_t pci_info(const char *sym, nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    DEV_CALL(sym)
    if (pci == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    memset(pci, 0, sizeof(*pci));
    unsigned int domain = 0, bus = 0, dev = 0, fn = 0;
    sscanf(g->bus_id, "%x:%x:%x.%x", &domain, &bus, &dev, &fn);
    pci->domain = domain;
    pci->bus = bus;
    pci->device = dev;
    pci->pciDeviceId = 0x233010DE;
    pci->pciSubSystemId = 0x16C110DE;
    copy_str(pci->busId, sizeof(pci->busId), g->bus_id);
    snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.%X", domain & 0xffff,
             bus, dev, fn);
    DONE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    return pci_info("nvmlDeviceGetPciInfo_v3", device, pci);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    return pci_info("nvmlDeviceGetPciInfo_v2", device, pci);
}

nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    return pci_info("nvmlDeviceGetPciInfo", device, pci);
}

/* ---------------------------------------------------------------- metrics */

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    MIG_CALL("nvmlDeviceGetMemoryInfo")
    if (memory == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    if (mig != NULL) {
        if (mig->mem_total == UNSET || mig->mem_used == UNSET)
            DONE(NVML_ERROR_NOT_SUPPORTED);
        memory->total = (unsigned long long)mig->mem_total;
        memory->used = (unsigned long long)mig->mem_used;
        memory->free = (unsigned long long)(mig->mem_total - mig->mem_used);
        DONE(NVML_SUCCESS);
    }
    if (g->mem_total == UNSET || g->mem_used == UNSET || g->mem_free == UNSET)
        DONE(NVML_ERROR_NOT_SUPPORTED);
    memory->total = (unsigned long long)g->mem_total;
    memory->free = (unsigned long long)g->mem_free;
    /* v1: "used" includes what the driver reserves */
    memory->used = (unsigned long long)g->mem_used +
                   (g->mem_reserved == UNSET ? 0ULL : (unsigned long long)g->mem_reserved);
    DONE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    MIG_CALL("nvmlDeviceGetMemoryInfo_v2")
    if (memory == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    if (memory->version != nvmlMemory_v2)
        DONE(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    if (mig != NULL) {
        if (mig->mem_total == UNSET || mig->mem_used == UNSET)
            DONE(NVML_ERROR_NOT_SUPPORTED);
        memory->total = (unsigned long long)mig->mem_total;
        memory->reserved = 0;
        memory->used = (unsigned long long)mig->mem_used;
        memory->free = (unsigned long long)(mig->mem_total - mig->mem_used);
        DONE(NVML_SUCCESS);
    }
    if (g->mem_total == UNSET || g->mem_used == UNSET || g->mem_free == UNSET ||
        g->mem_reserved == UNSET)
        DONE(NVML_ERROR_NOT_SUPPORTED);
    memory->total = (unsigned long long)g->mem_total;
    memory->reserved = (unsigned long long)g->mem_reserved;
    memory->free = (unsigned long long)g->mem_free;
    memory->used = (unsigned long long)g->mem_used;
    DONE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization)
{
    DEV_CALL("nvmlDeviceGetUtilizationRates")
    if (utilization == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    if (g->mig_cur == 1)
        DONE(NVML_ERROR_NOT_SUPPORTED); /* not given for a GPU in MIG mode */
    if (g->util_gpu == UNSET || g->util_mem == UNSET)
        DONE(NVML_ERROR_NOT_SUPPORTED);
    utilization->gpu = (unsigned int)g->util_gpu;
    utilization->memory = (unsigned int)g->util_mem;
    DONE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                      unsigned int *temp)
{
    DEV_CALL("nvmlDeviceGetTemperature")
    if (temp == NULL || sensorType != NVML_TEMPERATURE_GPU)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    if (g->temp == UNSET)
        DONE(NVML_ERROR_NOT_SUPPORTED);
    *temp = (unsigned int)g->temp;
    DONE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_t *temperature)
{
    DEV_CALL("nvmlDeviceGetTemperatureV")
    if (temperature == NULL || temperature->sensorType != NVML_TEMPERATURE_GPU)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    if (temperature->version != nvmlTemperature_v1)
        DONE(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    if (g->temp == UNSET)
        DONE(NVML_ERROR_NOT_SUPPORTED);
    temperature->temperature = (int)g->temp;
    DONE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
    UINT_METRIC("nvmlDeviceGetPowerUsage", power_mw, power);
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit)
{
    UINT_METRIC("nvmlDeviceGetEnforcedPowerLimit", power_limit_mw, limit);
}

nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *limit)
{
    UINT_METRIC("nvmlDeviceGetPowerManagementLimit", power_limit_mw, limit);
}

nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *speed)
{
    UINT_METRIC("nvmlDeviceGetFanSpeed", fan, speed);
}

nvmlReturn_t nvmlDeviceGetFanSpeed_v2(nvmlDevice_t device, unsigned int fan, unsigned int *speed)
{
    DEV_CALL("nvmlDeviceGetFanSpeed_v2")
    if (speed == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    if (g->fan == UNSET)
        DONE(NVML_ERROR_NOT_SUPPORTED);
    if (fan != 0)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    *speed = (unsigned int)g->fan;
    DONE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, nvmlPstates_t *pState)
{
    DEV_CALL("nvmlDeviceGetPerformanceState")
    if (pState == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    if (g->pstate == UNSET)
        DONE(NVML_ERROR_NOT_SUPPORTED);
    *pState = (nvmlPstates_t)g->pstate; /* 0-15, or 32: NVML_PSTATE_UNKNOWN */
    DONE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetNumFans(nvmlDevice_t device, unsigned int *numFans)
{
    DEV_CALL("nvmlDeviceGetNumFans")
    if (numFans == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    if (g->fan == UNSET)
        DONE(NVML_ERROR_NOT_SUPPORTED);
    *numFans = 1;
    DONE(NVML_SUCCESS);
}

static nvmlReturn_t clock_info(const char *sym, nvmlDevice_t device, nvmlClockType_t type,
                          unsigned int *clock_mhz, int max)
{
    DEV_CALL(sym)
    if (clock_mhz == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    long long v;
    if (type == NVML_CLOCK_GRAPHICS || type == NVML_CLOCK_SM)
        v = max ? g->clk_sm_max : g->clk_sm;
    else if (type == NVML_CLOCK_MEM)
        v = max ? g->clk_mem_max : g->clk_mem;
    else
        DONE(NVML_ERROR_NOT_SUPPORTED);
    if (v == UNSET)
        DONE(NVML_ERROR_NOT_SUPPORTED);
    *clock_mhz = (unsigned int)v;
    DONE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock_)
{
    return clock_info("nvmlDeviceGetClockInfo", device, type, clock_, 0);
}

nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                       unsigned int *clock_)
{
    return clock_info("nvmlDeviceGetMaxClockInfo", device, type, clock_, 1);
}

static nvmlReturn_t clock_reasons(const char *sym, nvmlDevice_t device, unsigned long long *out,
                            int supported)
{
    DEV_CALL(sym)
    if (out == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    if (!g->has_reasons)
        DONE(NVML_ERROR_NOT_SUPPORTED);
    *out = supported ? 0x1FFULL : g->reasons;
    DONE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                    unsigned long long *clocksEventReasons)
{
    return clock_reasons("nvmlDeviceGetCurrentClocksEventReasons", device, clocksEventReasons, 0);
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long *clocksThrottleReasons)
{
    return clock_reasons("nvmlDeviceGetCurrentClocksThrottleReasons", device, clocksThrottleReasons, 0);
}

nvmlReturn_t nvmlDeviceGetSupportedClocksEventReasons(nvmlDevice_t device,
                                                      unsigned long long *supportedClocksEventReasons)
{
    return clock_reasons("nvmlDeviceGetSupportedClocksEventReasons", device, supportedClocksEventReasons,
                   1);
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int *currLinkGen)
{
    UINT_METRIC("nvmlDeviceGetCurrPcieLinkGeneration", pcie_gen, currLinkGen);
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int *currLinkWidth)
{
    UINT_METRIC("nvmlDeviceGetCurrPcieLinkWidth", pcie_width, currLinkWidth);
}

nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int *maxLinkGen)
{
    UINT_METRIC("nvmlDeviceGetMaxPcieLinkGeneration", pcie_max_gen, maxLinkGen);
}

nvmlReturn_t nvmlDeviceGetGpuMaxPcieLinkGeneration(nvmlDevice_t device,
                                                   unsigned int *maxLinkGenDevice)
{
    UINT_METRIC("nvmlDeviceGetGpuMaxPcieLinkGeneration", pcie_max_gen, maxLinkGenDevice);
}

nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int *maxLinkWidth)
{
    UINT_METRIC("nvmlDeviceGetMaxPcieLinkWidth", pcie_max_width, maxLinkWidth);
}

nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, nvmlPcieUtilCounter_t counter,
                                         unsigned int *value)
{
    DEV_CALL("nvmlDeviceGetPcieThroughput")
    if (value == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    long long v;
    if (counter == NVML_PCIE_UTIL_TX_BYTES)
        v = g->pcie_tx;
    else if (counter == NVML_PCIE_UTIL_RX_BYTES)
        v = g->pcie_rx;
    else
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    if (v == UNSET)
        DONE(NVML_ERROR_NOT_SUPPORTED);
    *value = (unsigned int)v;
    DONE(NVML_SUCCESS);
}

static nvmlReturn_t codec(const char *sym, nvmlDevice_t device, unsigned int *utilization,
                          unsigned int *samplingPeriodUs, int decoder)
{
    DEV_CALL(sym)
    if (utilization == NULL || samplingPeriodUs == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    long long v = decoder ? g->dec : g->enc;
    if (v == UNSET)
        DONE(NVML_ERROR_NOT_SUPPORTED);
    *utilization = (unsigned int)v;
    *samplingPeriodUs = 167000;
    DONE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int *utilization,
                                             unsigned int *samplingPeriodUs)
{
    return codec("nvmlDeviceGetEncoderUtilization", device, utilization, samplingPeriodUs, 0);
}

nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int *utilization,
                                             unsigned int *samplingPeriodUs)
{
    return codec("nvmlDeviceGetDecoderUtilization", device, utilization, samplingPeriodUs, 1);
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
                                  unsigned int *pendingMode)
{
    DEV_CALL("nvmlDeviceGetMigMode")
    if (currentMode == NULL || pendingMode == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    if (g->mig_cur == UNSET)
        DONE(NVML_ERROR_NOT_SUPPORTED);
    *currentMode = (unsigned int)g->mig_cur;
    *pendingMode = (unsigned int)(g->mig_pending == UNSET ? g->mig_cur : g->mig_pending);
    DONE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                         nvmlEccCounterType_t counterType,
                                         unsigned long long *eccCounts)
{
    DEV_CALL("nvmlDeviceGetTotalEccErrors")
    if (eccCounts == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    long long v = counterType == NVML_VOLATILE_ECC ? g->ecc_volatile : g->ecc_aggregate;
    if (v == UNSET)
        DONE(NVML_ERROR_NOT_SUPPORTED);
    /* the scenario only holds uncorrected counts; corrected ones read as 0 */
    *eccCounts = errorType == NVML_MEMORY_ERROR_TYPE_UNCORRECTED ? (unsigned long long)v : 0ULL;
    DONE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t *mode)
{
    DEV_CALL("nvmlDeviceGetPersistenceMode")
    if (mode == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    *mode = NVML_FEATURE_ENABLED;
    DONE(NVML_SUCCESS);
}

/* ---------------------------------------------------------------- processes */

/* The entries a list call answers: on a MIG handle, those of its instance only. */
static unsigned int proc_select(const gpu_t *g, const migdev_t *mig, int graphics,
                                const proc_t **out, unsigned int cap)
{
    const proc_t *list = graphics ? g->gprocs : g->cprocs;
    unsigned int n = graphics ? g->ngprocs : g->ncprocs, k = 0;
    for (unsigned int i = 0; i < n; i++) {
        if (mig != NULL && (list[i].gi != mig->gi || list[i].ci != mig->ci))
            continue;
        if (k < cap)
            out[k] = &list[i];
        k++;
    }
    return k;
}

/* nvmlProcessInfo_v3_t as drivers 535.43-535.86 filled it: 32 bytes per entry. */
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
    unsigned long long usedGpuCcProtectedMemory;
} legacy_v3_t;

/* layout: 2 = v2/v3 (nvmlProcessInfo_t), 1 = v1, 3 = legacy v3 (32-byte entries) */
static nvmlReturn_t procs_any(const char *sym, nvmlDevice_t device, int graphics,
                              unsigned int *infoCount, void *infos, int layout)
{
    MIG_CALL(sym)
    if (infoCount == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    const proc_t *sel[1024];
    unsigned int n = proc_select(g, mig, graphics, sel, 1024);
    if (n > 1024)
        n = 1024;
    /* slots of the caller's (nvml.h-sized) array the answer needs */
    unsigned int need = n;
    if (layout == 3)
        need = (unsigned int)((n * sizeof(legacy_v3_t) + sizeof(nvmlProcessInfo_t) - 1) /
                              sizeof(nvmlProcessInfo_t));
    if (*infoCount < need) {
        /* includes the first call of every client: count 0, NULL array */
        *infoCount = need;
        DONE(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    if (n > 0 && infos == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    for (unsigned int i = 0; i < n; i++) {
        const proc_t *p = sel[i];
        if (layout == 1) {
            nvmlProcessInfo_v1_t *e = (nvmlProcessInfo_v1_t *)infos + i;
            e->pid = p->pid;
            e->usedGpuMemory = p->used;
        } else if (layout == 3) {
            legacy_v3_t *e = (legacy_v3_t *)infos + i;
            e->pid = p->pid;
            e->usedGpuMemory = p->used;
            e->gpuInstanceId = p->gi;
            e->computeInstanceId = p->ci;
            e->usedGpuCcProtectedMemory = p->cc;
        } else {
            nvmlProcessInfo_v2_t *e = (nvmlProcessInfo_v2_t *)infos + i;
            e->pid = p->pid;
            e->usedGpuMemory = p->used;
            e->gpuInstanceId = p->gi;
            e->computeInstanceId = p->ci;
        }
    }
    *infoCount = n;
    DONE(NVML_SUCCESS);
}

#ifdef FAKE_V3_LEGACY_STRIDE
#define V3_LAYOUT 3
#else
#define V3_LAYOUT 2
#endif

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos)
{
    return procs_any("nvmlDeviceGetComputeRunningProcesses_v3", device, 0, infoCount, infos,
                     V3_LAYOUT);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_v2_t *infos)
{
    return procs_any("nvmlDeviceGetComputeRunningProcesses_v2", device, 0, infoCount, infos, 2);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                  nvmlProcessInfo_v1_t *infos)
{
    return procs_any("nvmlDeviceGetComputeRunningProcesses", device, 0, infoCount, infos, 1);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                      nvmlProcessInfo_t *infos)
{
    return procs_any("nvmlDeviceGetGraphicsRunningProcesses_v3", device, 1, infoCount, infos,
                     V3_LAYOUT);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                                      nvmlProcessInfo_v2_t *infos)
{
    return procs_any("nvmlDeviceGetGraphicsRunningProcesses_v2", device, 1, infoCount, infos, 2);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                   nvmlProcessInfo_v1_t *infos)
{
    return procs_any("nvmlDeviceGetGraphicsRunningProcesses", device, 1, infoCount, infos, 1);
}

/* ---------------------------------------------------------------- MIG */

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice)
{
    MIG_CALL("nvmlDeviceIsMigDeviceHandle")
    if (isMigDevice == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    *isMigDevice = mig != NULL;
    DONE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
    DEV_CALL("nvmlDeviceGetMaxMigDeviceCount")
    if (count == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    if (g->mig_cur == UNSET)
        DONE(NVML_ERROR_NOT_SUPPORTED);
    *count = g->mig_cur == 1 ? 7 : 0;
    DONE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t *migDevice)
{
    DEV_CALL("nvmlDeviceGetMigDeviceHandleByIndex")
    if (migDevice == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    if (g->mig_cur != 1)
        DONE(NVML_ERROR_NOT_SUPPORTED);
    if (index >= MAX_MIG || !g->migs[index].present)
        DONE(NVML_ERROR_NOT_FOUND);
    struct nvmlDevice_st *h = &g_mig_handles[device->index * MAX_MIG + index];
    h->index = device->index;
    h->mig = (int)index;
    *migDevice = h;
    DONE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
                                                          nvmlDevice_t *device_out)
{
    nvmlDevice_t device = migDevice;
    MIG_CALL("nvmlDeviceGetDeviceHandleFromMigDeviceHandle")
    if (device_out == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    if (mig == NULL)
        DONE(NVML_ERROR_NOT_SUPPORTED);
    g_handles[device->index].index = device->index;
    g_handles[device->index].mig = -1;
    *device_out = &g_handles[device->index];
    DONE(NVML_SUCCESS);
}

static nvmlReturn_t instance_id(const char *sym, nvmlDevice_t device, unsigned int *id, int ci)
{
    MIG_CALL(sym)
    if (id == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    if (mig == NULL)
        DONE(NVML_ERROR_NOT_SUPPORTED); /* not a MIG device handle */
    *id = ci ? mig->ci : mig->gi;
    DONE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id)
{
    return instance_id("nvmlDeviceGetGpuInstanceId", device, id, 0);
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id)
{
    return instance_id("nvmlDeviceGetComputeInstanceId", device, id, 1);
}

static unsigned long long sample_ts(const psample_t *s, long long now_us)
{
    return (unsigned long long)(s->ts >= 0 ? s->ts : now_us + s->ts);
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t *utilization,
                                             unsigned int *processSamplesCount,
                                             unsigned long long lastSeenTimeStamp)
{
    DEV_CALL("nvmlDeviceGetProcessUtilization")
    if (processSamplesCount == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    if (g->mig_cur == 1)
        DONE(NVML_ERROR_NOT_SUPPORTED);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    long long now_us = (long long)now.tv_sec * 1000000LL + now.tv_nsec / 1000;
    unsigned int n = 0;
    for (unsigned int i = 0; i < g->nsamples; i++)
        if (sample_ts(&g->samples[i], now_us) > lastSeenTimeStamp)
            n++;
    if (n == 0) {
        *processSamplesCount = 0;
        DONE(NVML_ERROR_NOT_FOUND); /* nothing newer than lastSeenTimeStamp */
    }
    if (utilization == NULL || *processSamplesCount < n) {
        *processSamplesCount = n;
        DONE(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    unsigned int k = 0;
    for (unsigned int i = 0; i < g->nsamples; i++) {
        const psample_t *s = &g->samples[i];
        unsigned long long ts = sample_ts(s, now_us);
        if (ts <= lastSeenTimeStamp)
            continue;
        utilization[k].pid = s->pid;
        utilization[k].timeStamp = ts;
        utilization[k].smUtil = s->sm;
        utilization[k].memUtil = s->mem;
        utilization[k].encUtil = s->enc;
        utilization[k].decUtil = s->dec;
        k++;
    }
    *processSamplesCount = k;
    DONE(NVML_SUCCESS);
}

/* ---------------------------------------------------------------- GPM */

#define GPM_MAGIC 0x67706d31u

struct nvmlGpmSample_st {
    unsigned int magic;
    int filled;
    unsigned int dev;
    long long gi; /* -1: the whole GPU */
    unsigned long long seq;
};

static unsigned long long g_gpm_seq = 0;

nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t *gpmSupport)
{
    DEV_CALL("nvmlGpmQueryDeviceSupport")
    if (gpmSupport == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    if (gpmSupport->version != NVML_GPM_SUPPORT_VERSION)
        DONE(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    if (g->gpm_support < 0)
        DONE(NVML_ERROR_NOT_SUPPORTED);
    gpmSupport->isSupportedDevice = (unsigned int)g->gpm_support;
    DONE(NVML_SUCCESS);
}

nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *gpmSample)
{
    SYS_CALL("nvmlGpmSampleAlloc")
    if (gpmSample == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    struct nvmlGpmSample_st *sample = calloc(1, sizeof(*sample));
    if (sample == NULL)
        DONE(NVML_ERROR_MEMORY);
    sample->magic = GPM_MAGIC;
    *gpmSample = sample;
    DONE(NVML_SUCCESS);
}

nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t gpmSample)
{
    SYS_CALL("nvmlGpmSampleFree")
    if (gpmSample == NULL || gpmSample->magic != GPM_MAGIC)
        DONE(NVML_ERROR_INVALID_ARGUMENT); /* never allocated, or freed twice */
    gpmSample->magic = 0;
    free(gpmSample);
    DONE(NVML_SUCCESS);
}

static nvmlReturn_t gpm_fill(const gpu_t *g, nvmlDevice_t device, long long gi,
                             nvmlGpmSample_t sample)
{
    if (sample == NULL || sample->magic != GPM_MAGIC)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (g->gpm_support != 1)
        return NVML_ERROR_NOT_SUPPORTED;
    sample->filled = 1;
    sample->dev = device->index;
    sample->gi = gi;
    sample->seq = ++g_gpm_seq;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t gpmSample)
{
    DEV_CALL("nvmlGpmSampleGet")
    DONE(gpm_fill(g, device, -1, gpmSample));
}

nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpuInstanceId,
                                 nvmlGpmSample_t gpmSample)
{
    DEV_CALL("nvmlGpmMigSampleGet")
    int found = 0;
    for (int i = 0; i < MAX_MIG; i++)
        found |= g->migs[i].present && g->migs[i].gi == gpuInstanceId;
    if (g->mig_cur != 1 || !found)
        DONE(NVML_ERROR_NOT_FOUND);
    DONE(gpm_fill(g, device, gpuInstanceId, gpmSample));
}

/* Each metric's value is the scenario's, whatever the two samples' spacing: tests then
 * assert exact numbers; the spacing rule is the caller's (tested with its clock). */
nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *metricsGet)
{
    if (metricsGet == NULL || metricsGet->sample1 == NULL || metricsGet->sample2 == NULL ||
        metricsGet->sample1->magic != GPM_MAGIC || metricsGet->sample2->magic != GPM_MAGIC ||
        !metricsGet->sample1->filled || !metricsGet->sample2->filled)
        return NVML_ERROR_INVALID_ARGUMENT;
    gpu_t *g;
    unsigned int sleep_ms_;
    nvmlReturn_t r_ = enter("nvmlGpmMetricsGet", (int)metricsGet->sample1->dev, &g, &sleep_ms_);
    if (r_ != NVML_SUCCESS)
        return leave(r_, sleep_ms_);
    if (metricsGet->version != NVML_GPM_METRICS_GET_VERSION)
        DONE(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    /* more metrics than the array holds: a caller whose struct is shorter than it says */
    unsigned int room = g->gpm_slots ? g->gpm_slots : NVML_GPM_METRIC_MAX;
    if (metricsGet->numMetrics == 0 || metricsGet->numMetrics > room ||
        metricsGet->numMetrics > NVML_GPM_METRIC_MAX)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    const struct nvmlGpmSample_st *a = metricsGet->sample1, *b = metricsGet->sample2;
    if (a->dev != b->dev || a->gi != b->gi || b->seq <= a->seq)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    for (unsigned int i = 0; i < metricsGet->numMetrics; i++) {
        nvmlGpmMetric_t *m = &metricsGet->metrics[i];
        m->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        m->value = 0.0;
        m->metricInfo.shortName = m->metricInfo.longName = m->metricInfo.unit = NULL;
        for (unsigned int k = 0; k < g->ngpm; k++) {
            if (g->gpm_ids[k] == m->metricId && g->gpm_set[k]) {
                m->nvmlReturn = NVML_SUCCESS;
                m->value = g->gpm_vals[k];
            }
        }
    }
    DONE(NVML_SUCCESS);
}

/* ---------------------------------------------------------------- NVLink */

static nvmlReturn_t link_ok(const gpu_t *g, unsigned int link)
{
    if (g->nlinks == 0)
        return NVML_ERROR_NOT_SUPPORTED;
    return link < g->nlinks ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                      nvmlEnableState_t *isActive)
{
    DEV_CALL("nvmlDeviceGetNvLinkState")
    if (isActive == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    nvmlReturn_t ret = link_ok(g, link);
    if (ret == NVML_SUCCESS)
        *isActive = g->link_active[link] ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    DONE(ret);
}

nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t device, unsigned int link,
                                        unsigned int *version)
{
    DEV_CALL("nvmlDeviceGetNvLinkVersion")
    if (version == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    nvmlReturn_t ret = link_ok(g, link);
    if (ret == NVML_SUCCESS && g->nvl_version == UNSET)
        ret = NVML_ERROR_NOT_SUPPORTED;
    if (ret == NVML_SUCCESS)
        *version = (unsigned int)g->nvl_version;
    DONE(ret);
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t *pci)
{
    DEV_CALL("nvmlDeviceGetNvLinkRemotePciInfo_v2")
    if (pci == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    nvmlReturn_t ret = link_ok(g, link);
    if (ret == NVML_SUCCESS) {
        memset(pci, 0, sizeof(*pci));
        copy_str(pci->busId, sizeof(pci->busId), g->link_bus[link]);
        copy_str(pci->busIdLegacy, sizeof(pci->busIdLegacy), g->link_bus[link]);
    }
    DONE(ret);
}

nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                 nvmlIntNvLinkDeviceType_t *pNvLinkDeviceType)
{
    DEV_CALL("nvmlDeviceGetNvLinkRemoteDeviceType")
    if (pNvLinkDeviceType == NULL)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    nvmlReturn_t ret = link_ok(g, link);
    if (ret == NVML_SUCCESS)
        *pNvLinkDeviceType = (nvmlIntNvLinkDeviceType_t)g->link_type[link];
    DONE(ret);
}

/* The NVLink throughput counters (138 TX, 139 RX: cumulative KiB) grow by the scenario's
 * step at every call; so do the PCIe byte counters (197 TX, 198 RX: drivers 555 and later,
 * a GPU with pcie_kbps), by one second of pcie_kbps. Every other field, and one a field_err
 * line names, answers NOT_SUPPORTED (that line's code) in its entry. */
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
                                      nvmlFieldValue_t *values)
{
    DEV_CALL("nvmlDeviceGetFieldValues")
    if (values == NULL || valuesCount < 0)
        DONE(NVML_ERROR_INVALID_ARGUMENT);
    if (g->has_nvl_kib) {
        g->nvl_tx += g->nvl_tx_step;
        g->nvl_rx += g->nvl_rx_step;
    }
    int pcie = atoi(g_sc->driver) >= PCIE_COUNTERS_SINCE && g->pcie_tx != UNSET &&
               g->pcie_rx != UNSET;
    if (pcie) { /* unsigned: wraps as the driver's counters do */
        g->pcie_tx_count += (unsigned long long)g->pcie_tx * 1024ULL;
        g->pcie_rx_count += (unsigned long long)g->pcie_rx * 1024ULL;
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    for (int i = 0; i < valuesCount; i++) {
        nvmlFieldValue_t *v = &values[i];
        v->timestamp = (long long)now.tv_sec * 1000000LL + now.tv_nsec / 1000;
        v->latencyUsec = 0;
        v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
        v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        unsigned int e = 0;
        while (e < g->nfield_errs && g->field_err_ids[e] != v->fieldId)
            e++;
        if (e < g->nfield_errs) {
            v->nvmlReturn = (nvmlReturn_t)g->field_err_codes[e];
        } else if (pcie && v->fieldId == NVML_FI_DEV_PCIE_COUNT_TX_BYTES) {
            v->value.ullVal = g->pcie_tx_count;
            v->nvmlReturn = NVML_SUCCESS;
        } else if (pcie && v->fieldId == NVML_FI_DEV_PCIE_COUNT_RX_BYTES) {
            v->value.ullVal = g->pcie_rx_count;
            v->nvmlReturn = NVML_SUCCESS;
        } else if (!g->has_nvl_kib) {
            continue;
        } else if (v->fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX) {
            v->value.ullVal = g->nvl_tx;
            v->nvmlReturn = NVML_SUCCESS;
        } else if (v->fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX) {
            v->value.ullVal = g->nvl_rx;
            v->nvmlReturn = NVML_SUCCESS;
        }
    }
    DONE(NVML_SUCCESS);
}
