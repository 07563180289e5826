/*
 * The sandbox ("pause") process of the e2e node's pods, written for Sluice's
 * test harness: it holds the pod's namespaces, reaps children that are
 * reparented to it, and exits on SIGINT or SIGTERM. The harness builds it at
 * test time with `gcc -static` into a one-file image (tests/src/node.rs).
 */
#include <signal.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) {
    (void)sig;
    _exit(0);
}

static void reap(int sig) {
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void) {
    struct sigaction on_stop = {0};
    on_stop.sa_handler = stop;
    sigaction(SIGINT, &on_stop, NULL);
    sigaction(SIGTERM, &on_stop, NULL);

    struct sigaction on_child = {0};
    on_child.sa_handler = reap;
    on_child.sa_flags = SA_NOCLDSTOP | SA_RESTART;
    sigaction(SIGCHLD, &on_child, NULL);

    for (;;) {
        pause();
    }
}
