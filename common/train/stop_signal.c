// stop_signal.c: see stop_signal.h.
#define _POSIX_C_SOURCE 200809L  // sigaction
#include "train/stop_signal.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "util/util.h"

static volatile sig_atomic_t requested = 0;

// Only async-signal-safe calls in here: write, unlink (through
// atomic_remove_temporaries) and _exit.
static void on_signal(int sig) {
    if (!requested) {
        requested = sig;
        static const char msg[] = "\nstopping after this step (again to stop at once)\n";
        ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)ignored;
        return;
    }
    atomic_remove_temporaries();
    static const char msg[] = "\nstopped at once; no file was left half-written\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    _exit(128 + sig);
}

void stop_signals_install(void) {
    requested = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;  // reads and writes in progress carry on
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int stop_requested(void) { return requested; }

const char *stop_signal_name(int sig) {
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
}

int stop_exit_status(void) { return requested ? 128 + requested : 0; }
