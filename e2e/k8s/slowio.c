/* slowio.so: a slow disk for one process, as an LD_PRELOAD shim (e2e/k8s/pod_runner.py's
 * PodRunner.slow_disk).
 *
 *   gcc -shared -fPIC -O2 -o slowio.so slowio.c -ldl -lpthread
 *   SKEIN_SLOWIO_PREFIX=/data[:/other]  SKEIN_SLOWIO_RATE_FILE=/path/rate  LD_PRELOAD=./slowio.so prog
 *
 * Writes (write, pwrite, pwrite64, writev, pwritev, pwritev64, pwritev2, pwritev64v2) to regular
 * files whose path (readlink of /proc/self/fd/N) is under one of the prefixes are paced to the
 * rate in the rate file: one integer, bytes per second; a missing or empty file, or 0, means
 * unthrottled. The file is read again at most every 200 ms, so the rate changes live. One token
 * bucket serves all threads: a mutex-protected "next free time"; a write of n bytes reserves
 * n/rate seconds from it and sleeps (outside the lock) until its reservation ends, then calls the
 * real function (dlsym RTLD_NEXT). No burst: idle time is not saved up. A sleep is cut short when
 * the rate drops to unthrottled. errno is what the real call leaves.
 *
 * Cheap when unthrottled: a clock read per write (the rate is cached). When throttled, an fstat
 * per write; the path verdict is cached per fd and (device, inode).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define RATE_REFRESH_NS 200000000LL
#define MAX_SLEEP_SLICE_NS 100000000LL
#define FD_CACHE 4096
#define MAX_PREFIXES 8

typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef ssize_t (*pwrite64_fn)(int, const void *, size_t, off64_t);
typedef ssize_t (*writev_fn)(int, const struct iovec *, int);
typedef ssize_t (*pwritev_fn)(int, const struct iovec *, int, off_t);
typedef ssize_t (*pwritev64_fn)(int, const struct iovec *, int, off64_t);
typedef ssize_t (*pwritev2_fn)(int, const struct iovec *, int, off_t, int);
typedef ssize_t (*pwritev64v2_fn)(int, const struct iovec *, int, off64_t, int);

static write_fn real_write;
static pwrite_fn real_pwrite;
static pwrite64_fn real_pwrite64;
static writev_fn real_writev;
static pwritev_fn real_pwritev;
static pwritev64_fn real_pwritev64;
static pwritev2_fn real_pwritev2;
static pwritev64v2_fn real_pwritev64v2;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char *prefixes[MAX_PREFIXES];
static size_t prefix_lens[MAX_PREFIXES];
static int n_prefixes;
static char rate_file[4096];
static int64_t rate;               /* bytes per second; 0 = unthrottled */
static int64_t rate_read_at = -1;  /* CLOCK_MONOTONIC ns of the last read of rate_file */
static int64_t next_free;          /* CLOCK_MONOTONIC ns at which the "disk" is free again */

struct fd_verdict {
    dev_t dev;
    ino_t ino;
    int known; /* 0: not cached; 1: throttled; 2: not throttled */
};
static struct fd_verdict verdicts[FD_CACHE];

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void init(void) {
    real_write = (write_fn)dlsym(RTLD_NEXT, "write");
    real_pwrite = (pwrite_fn)dlsym(RTLD_NEXT, "pwrite");
    real_pwrite64 = (pwrite64_fn)dlsym(RTLD_NEXT, "pwrite64");
    real_writev = (writev_fn)dlsym(RTLD_NEXT, "writev");
    real_pwritev = (pwritev_fn)dlsym(RTLD_NEXT, "pwritev");
    real_pwritev64 = (pwritev64_fn)dlsym(RTLD_NEXT, "pwritev64");
    real_pwritev2 = (pwritev2_fn)dlsym(RTLD_NEXT, "pwritev2");
    real_pwritev64v2 = (pwritev64v2_fn)dlsym(RTLD_NEXT, "pwritev64v2");
    const char *p = getenv("SKEIN_SLOWIO_PREFIX");
    const char *r = getenv("SKEIN_SLOWIO_RATE_FILE");
    if (p && *p && r && *r && strlen(r) < sizeof rate_file) {
        strcpy(rate_file, r);
        char *copy = strdup(p);
        for (char *save = NULL, *tok = copy ? strtok_r(copy, ":", &save) : NULL;
             tok && n_prefixes < MAX_PREFIXES; tok = strtok_r(NULL, ":", &save)) {
            size_t len = strlen(tok);
            while (len > 1 && tok[len - 1] == '/')
                tok[--len] = '\0';
            prefixes[n_prefixes] = tok;
            prefix_lens[n_prefixes++] = len;
        }
    }
}

__attribute__((constructor)) static void slowio_ctor(void) { pthread_once(&once, init); }

/* The current rate, read from rate_file at most every RATE_REFRESH_NS. Called with lock held. */
static int64_t current_rate_locked(int64_t now) {
    if (rate_read_at >= 0 && now - rate_read_at < RATE_REFRESH_NS)
        return rate;
    int64_t value = 0;
    int fd = open(rate_file, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        char buf[32];
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n > 0) {
            buf[n] = '\0';
            value = strtoll(buf, NULL, 10);
            if (value < 0)
                value = 0;
        }
    }
    if (value != rate)
        next_free = 0; /* a new rate starts from now, without the old backlog */
    __atomic_store_n(&rate, value, __ATOMIC_RELAXED);
    __atomic_store_n(&rate_read_at, now, __ATOMIC_RELEASE);
    return value;
}

static int64_t current_rate(void) {
    int64_t now = now_ns();
    int64_t at = __atomic_load_n(&rate_read_at, __ATOMIC_ACQUIRE);
    if (at >= 0 && now - at < RATE_REFRESH_NS)
        return __atomic_load_n(&rate, __ATOMIC_RELAXED); /* fresh enough: no lock */
    pthread_mutex_lock(&lock);
    int64_t r = current_rate_locked(now);
    pthread_mutex_unlock(&lock);
    return r;
}

static int under_prefix(const char *path) {
    for (int i = 0; i < n_prefixes; i++) {
        size_t len = prefix_lens[i];
        if (strncmp(path, prefixes[i], len) == 0 && (path[len] == '/' || path[len] == '\0' || len == 1))
            return 1;
    }
    return 0;
}

/* Whether writes to fd are paced: a regular file under a prefix. */
static int throttled_fd(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    if (fd >= 0 && fd < FD_CACHE) {
        pthread_mutex_lock(&lock);
        struct fd_verdict v = verdicts[fd];
        pthread_mutex_unlock(&lock);
        if (v.known && v.dev == st.st_dev && v.ino == st.st_ino)
            return v.known == 1;
    }
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n < 0)
        return 0;
    path[n] = '\0';
    int yes = under_prefix(path);
    if (fd >= 0 && fd < FD_CACHE) {
        pthread_mutex_lock(&lock);
        verdicts[fd] = (struct fd_verdict){st.st_dev, st.st_ino, yes ? 1 : 2};
        pthread_mutex_unlock(&lock);
    }
    return yes;
}

/* Sleeps as the disk writes `bytes` to fd, if fd is paced. Leaves errno as it found it. */
static void pace(int fd, size_t bytes) {
    pthread_once(&once, init);
    if (n_prefixes == 0 || bytes == 0)
        return;
    int saved = errno;
    if (current_rate() > 0 && throttled_fd(fd)) {
        pthread_mutex_lock(&lock);
        int64_t now = now_ns();
        int64_t r = current_rate_locked(now);
        int64_t until = now;
        if (r > 0) {
            int64_t start = next_free > now ? next_free : now;
            until = start + (int64_t)((double)bytes * 1e9 / (double)r);
            next_free = until;
        }
        pthread_mutex_unlock(&lock);
        for (;;) {
            now = now_ns();
            if (now >= until)
                break;
            int64_t slice = until - now;
            if (slice > MAX_SLEEP_SLICE_NS)
                slice = MAX_SLEEP_SLICE_NS;
            struct timespec ts = {slice / 1000000000LL, slice % 1000000000LL};
            nanosleep(&ts, NULL);
            if (current_rate() == 0)
                break; /* unthrottled meanwhile: the disk is fast again */
        }
    }
    errno = saved;
}

static size_t iov_bytes(const struct iovec *iov, int n) {
    size_t total = 0;
    for (int i = 0; i < n && iov; i++)
        total += iov[i].iov_len;
    return total;
}

ssize_t write(int fd, const void *buf, size_t count) {
    pace(fd, count);
    return real_write(fd, buf, count);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    pace(fd, count);
    return real_pwrite(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off64_t offset) {
    pace(fd, count);
    return real_pwrite64(fd, buf, count, offset);
}

ssize_t writev(int fd, const struct iovec *iov, int iovcnt) {
    pace(fd, iov_bytes(iov, iovcnt));
    return real_writev(fd, iov, iovcnt);
}

ssize_t pwritev(int fd, const struct iovec *iov, int iovcnt, off_t offset) {
    pace(fd, iov_bytes(iov, iovcnt));
    return real_pwritev(fd, iov, iovcnt, offset);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int iovcnt, off64_t offset) {
    pace(fd, iov_bytes(iov, iovcnt));
    return real_pwritev64(fd, iov, iovcnt, offset);
}

ssize_t pwritev2(int fd, const struct iovec *iov, int iovcnt, off_t offset, int flags) {
    pace(fd, iov_bytes(iov, iovcnt));
    if (!real_pwritev2) {
        errno = ENOSYS;
        return -1;
    }
    return real_pwritev2(fd, iov, iovcnt, offset, flags);
}

ssize_t pwritev64v2(int fd, const struct iovec *iov, int iovcnt, off64_t offset, int flags) {
    pace(fd, iov_bytes(iov, iovcnt));
    if (!real_pwritev64v2) {
        errno = ENOSYS;
        return -1;
    }
    return real_pwritev64v2(fd, iov, iovcnt, offset, flags);
}
