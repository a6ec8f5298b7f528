/*
 * pause.c -- owned by the integration test harness (tests/images).
 *
 * The infra ("pause") process of every pod sandbox in picolet's integration
 * tests. No registry is reachable from CI, so instead of pulling
 * registry.k8s.io/pause we build this one and package it under that name
 * (see build-images.sh).
 *
 * It runs as PID 1 of the sandbox's PID namespace, so it must:
 *   - exit 0 on SIGINT/SIGTERM (PID 1 has no default signal actions);
 *   - reap orphans that get re-parented to it (SIGCHLD -> waitpid loop);
 *   - otherwise sleep forever without burning CPU.
 *
 * Build: gcc -static -Os -o pause pause.c && strip pause
 * "pause -v" prints a version line and exits 0 (handy for smoke tests).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAUSE_VERSION "picolet-test-pause 1"

static void on_terminate(int sig)
{
	(void)sig;
	_exit(0);
}

static void on_child(int sig)
{
	int saved = errno;
	(void)sig;
	/* Reap every child that has exited; never block. */
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	errno = saved;
}

static int install(int sig, void (*handler)(int), int flags)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sa.sa_flags = flags;
	sigemptyset(&sa.sa_mask);
	return sigaction(sig, &sa, NULL);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "-v") == 0) {
		puts(PAUSE_VERSION);
		return 0;
	}
	if (getpid() != 1)
		fprintf(stderr, "pause: warning: not running as PID 1\n");

	if (install(SIGINT, on_terminate, 0) < 0 ||
	    install(SIGTERM, on_terminate, 0) < 0 ||
	    install(SIGCHLD, on_child, SA_NOCLDSTOP | SA_RESTART) < 0) {
		perror("pause: sigaction");
		return 1;
	}

	for (;;)
		pause();
	/* not reached */
	return 42;
}
