/* Test-only LD_PRELOAD library: shifts the wall clock of the process it is
 * loaded into, leaving its monotonic clock alone (a host clock stepped by an
 * operator or NTP). The shift, in seconds (e.g. "-3600"), is read from the file
 * named by $CLOCK_SHIFT_FILE, at most every 100 ms, so a test steps the clock
 * of a running process by rewriting the file.
 *
 * Why not libfaketime: Debian's faketime 0.9.10 can leave the monotonic clock
 * unfaked (FAKETIME_DONT_FAKE_MONOTONIC=1), but then Python 3.11's time.sleep
 * (clock_nanosleep on CLOCK_MONOTONIC, TIMER_ABSTIME) fails with EINVAL; faking
 * both clocks is not a wall-clock step.
 *
 * Built by tests/integration/test_clock_jumps.py with the C compiler. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

static _Atomic long long shift_ns;
static _Atomic long long next_read_ns;

static clock_gettime_fn real_clock_gettime(void) {
    static _Atomic(clock_gettime_fn) real;
    clock_gettime_fn f = atomic_load(&real);
    if (f == NULL) {
        f = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
        atomic_store(&real, f);
    }
    return f;
}

static long long current_shift_ns(void) {
    struct timespec mono;
    real_clock_gettime()(CLOCK_MONOTONIC, &mono);
    long long now = (long long)mono.tv_sec * 1000000000LL + mono.tv_nsec;
    long long due = atomic_load(&next_read_ns);
    if (now >= due && atomic_compare_exchange_strong(&next_read_ns, &due, now + 100000000LL)) {
        const char *path = getenv("CLOCK_SHIFT_FILE");
        FILE *f = path ? fopen(path, "r") : NULL;
        if (f != NULL) {
            long long seconds;
            if (fscanf(f, "%lld", &seconds) == 1) {
                atomic_store(&shift_ns, seconds * 1000000000LL);
            }
            fclose(f);
        }
    }
    return atomic_load(&shift_ns);
}

static void shift(struct timespec *ts) {
    long long t = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + current_shift_ns();
    ts->tv_sec = t / 1000000000LL;
    ts->tv_nsec = t % 1000000000LL;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    int rc = real_clock_gettime()(id, ts);
    if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) {
        shift(ts);
    }
    return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    (void)tz;
    struct timespec ts;
    int rc = clock_gettime(CLOCK_REALTIME, &ts);
    if (rc == 0) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return rc;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out != NULL) {
        *out = ts.tv_sec;
    }
    return ts.tv_sec;
}
