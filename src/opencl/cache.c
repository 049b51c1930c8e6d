/* The on-disk binary cache: one file per program, named by a hash of everything that
 * determines the binary. Files are written atomically and verified before they are trusted. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cl_internal.h"

#define FC_CACHE_MAGIC "FLASHCL-BINARY-1"   /* 16 bytes; bump when the layout changes */
#define FC_CACHE_MAX_BYTES ((size_t)1 << 30) /* refuse absurd sizes from damaged headers */

typedef struct fc_cache_header {
    char magic[16];
    char key[32];
    uint64_t payload_bytes;
    uint64_t payload_checksum;
} fc_cache_header;

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    size_t i;
    for (i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static uint64_t fnv1a_str(uint64_t h, const char *s) {
    /* The terminating NUL separates fields so "ab"+"c" differs from "a"+"bc". */
    return fnv1a(h, s, strlen(s) + 1);
}

void fc_cache_make_key(fc_cache_key *key, const fc_cl_device *dev, const char *options,
                       const char *const *sources, size_t nsources) {
    /* Two independent 64-bit FNV-1a streams (different seeds) give a 128-bit key. */
    uint64_t h[2] = {0xcbf29ce484222325ULL, 0x84222325cbf29ce4ULL};
    int k;
    size_t i;
    for (k = 0; k < 2; k++) {
        h[k] = fnv1a_str(h[k], FC_CACHE_MAGIC);
        h[k] = fnv1a_str(h[k], dev->info.platform);
        h[k] = fnv1a_str(h[k], dev->info.vendor);
        h[k] = fnv1a_str(h[k], dev->info.name);
        h[k] = fnv1a_str(h[k], dev->driver_version);
        h[k] = fnv1a_str(h[k], dev->device_version);
        h[k] = fnv1a_str(h[k], options);
        for (i = 0; i < nsources; i++) h[k] = fnv1a_str(h[k], sources[i]);
    }
    snprintf(key->hex, sizeof key->hex, "%016llx%016llx", (unsigned long long)h[0],
             (unsigned long long)h[1]);
}

int fc_cache_dir(const char *requested, char *out, size_t out_size) {
    const char *env;
    out[0] = '\0';
    if (requested) {
        if (!requested[0]) return 0;
        snprintf(out, out_size, "%s", requested);
        return 1;
    }
    if ((env = getenv("FLASHCL_CACHE_DIR")) != NULL) {
        if (!env[0]) return 0;
        snprintf(out, out_size, "%s", env);
        return 1;
    }
    if ((env = getenv("XDG_CACHE_HOME")) != NULL && env[0]) {
        snprintf(out, out_size, "%s/flashcl", env);
        return 1;
    }
    if ((env = getenv("HOME")) != NULL && env[0]) {
        snprintf(out, out_size, "%s/.cache/flashcl", env);
        return 1;
    }
    return 0;
}

static void cache_path(char *out, size_t size, const char *dir, const fc_cache_key *key) {
    snprintf(out, size, "%s/%s.bin", dir, key->hex);
}

unsigned char *fc_cache_load(const char *dir, const fc_cache_key *key, size_t *size) {
    char path[4096];
    fc_cache_header hdr;
    unsigned char *data = NULL;
    long file_bytes;
    FILE *f;

    cache_path(path, sizeof path, dir, key);
    f = fopen(path, "rb");
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0 || (file_bytes = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
        goto bad;
    if (fread(&hdr, sizeof hdr, 1, f) != 1) goto bad;
    if (memcmp(hdr.magic, FC_CACHE_MAGIC, sizeof hdr.magic) != 0) goto bad;
    if (memcmp(hdr.key, key->hex, sizeof hdr.key) != 0) goto bad;
    if (hdr.payload_bytes == 0 || hdr.payload_bytes > FC_CACHE_MAX_BYTES) goto bad;
    if ((uint64_t)file_bytes != sizeof hdr + hdr.payload_bytes) goto bad;
    data = malloc((size_t)hdr.payload_bytes);
    if (!data) goto bad;
    if (fread(data, 1, (size_t)hdr.payload_bytes, f) != hdr.payload_bytes) goto bad;
    if (fnv1a(0xcbf29ce484222325ULL, data, (size_t)hdr.payload_bytes) != hdr.payload_checksum)
        goto bad;
    fclose(f);
    *size = (size_t)hdr.payload_bytes;
    return data;
bad:
    free(data);
    fclose(f);
    return NULL;
}

/* mkdir -p; existing folders are fine. */
static int make_dirs(const char *dir) {
    char path[4096];
    size_t i, n = strlen(dir);
    if (n == 0 || n >= sizeof path) return 0;
    memcpy(path, dir, n + 1);
    for (i = 1; i <= n; i++) {
        if (path[i] == '/' || path[i] == '\0') {
            char saved = path[i];
            path[i] = '\0';
            if (mkdir(path, 0755) != 0 && errno != EEXIST) return 0;
            path[i] = saved;
        }
    }
    return 1;
}

int fc_cache_store(const char *dir, const fc_cache_key *key, const unsigned char *data,
                   size_t size) {
    char path[4096], tmp[4200];
    fc_cache_header hdr;
    FILE *f;
    int ok;

    if (!make_dirs(dir)) return 0;
    memset(&hdr, 0, sizeof hdr);
    memcpy(hdr.magic, FC_CACHE_MAGIC, sizeof hdr.magic);
    memcpy(hdr.key, key->hex, sizeof hdr.key);
    hdr.payload_bytes = size;
    hdr.payload_checksum = fnv1a(0xcbf29ce484222325ULL, data, size);

    cache_path(path, sizeof path, dir, key);
    /* A name unique to this process and moment, so concurrent writers never share a temp. */
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%ld.%p", path, (long)getpid(), (long)clock(),
             (const void *)&hdr);
    f = fopen(tmp, "wb");
    if (!f) return 0;
    ok = fwrite(&hdr, sizeof hdr, 1, f) == 1 && fwrite(data, 1, size, f) == size;
    ok = (fflush(f) == 0) && ok;
    ok = (fsync(fileno(f)) == 0) && ok;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        return 0;
    }
    return 1;
}
