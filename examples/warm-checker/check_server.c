/* A warm checker in C (docs/checkers.md): started once per worker by
 *   intact check BUNDLE --checker-server ./check_server
 * it reads one JSON request per line on stdin and answers one JSON line on stdout.
 * Each state is judged in a forked child, so nothing one check leaves behind (memory,
 * descriptors, the working directory, a crash) reaches the next.
 *
 * The check itself is an example: the state is consistent when the file named by the
 * first argument (default "data") is absent or ends with a newline.
 *
 * JSON handling is the minimum the protocol needs: the runner's paths are plain, so the
 * value of "crash_dir" is copied up to the next quote; a path holding a quote or a
 * backslash (escaped in JSON) is refused rather than misread. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *file_name = "data";

/* The string value of "key" in a one-line JSON object; NULL if absent or escaped. */
static char *field(const char *line, const char *key) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":\"", key);
    const char *start = strstr(line, pattern);
    if (!start) return NULL;
    start += strlen(pattern);
    const char *end = strchr(start, '"');
    if (!end || memchr(start, '\\', (size_t)(end - start))) return NULL;
    return strndup(start, (size_t)(end - start));
}

/* 0 = consistent; otherwise writes the reason (one line, no quotes) to why. */
static int check(const char *crash_dir, char *why, size_t why_len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", crash_dir, file_name);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    off_t size = lseek(fd, 0, SEEK_END);
    char last = '\n';
    if (size > 0 && pread(fd, &last, 1, size - 1) != 1) last = 0;
    close(fd);
    if (last == '\n') return 0;
    snprintf(why, why_len, "%s does not end with a newline (%lld bytes)", file_name, (long long)size);
    return 1;
}

/* Judges one state in a child; the child's exit status carries the verdict and a pipe
 * the reason. A child killed by a signal is a failure, as for a per-process checker. */
static void judge(const char *crash_dir, FILE *replies) {
    int fds[2];
    char why[512] = "";
    if (pipe(fds) != 0) { perror("pipe"); exit(3); }
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); exit(3); }
    if (pid == 0) {
        close(fds[0]);
        int bad = check(crash_dir, why, sizeof why);
        if (bad && write(fds[1], why, strlen(why)) < 0) _exit(3);
        _exit(bad);
    }
    close(fds[1]);
    ssize_t n = read(fds[0], why, sizeof why - 1);
    why[n > 0 ? n : 0] = 0;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        fprintf(replies, "{\"verdict\":\"pass\"}\n");
    else if (WIFSIGNALED(status))
        fprintf(replies, "{\"verdict\":\"fail\",\"message\":\"the check was killed by signal %d\"}\n", WTERMSIG(status));
    else
        fprintf(replies, "{\"verdict\":\"fail\",\"message\":\"%s\"}\n", why);
    fflush(replies);
}

int main(int argc, char **argv) {
    if (argc > 1) file_name = argv[1];
    /* The protocol owns stdout: keep it for replies, send anything else to stderr. */
    FILE *replies = fdopen(dup(1), "w");
    if (!replies || dup2(2, 1) < 0) { perror("stdout"); return 3; }
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, stdin) > 0) {
        char *dir = field(line, "crash_dir");
        if (!dir) {
            fprintf(stderr, "check_server: a request without a plain crash_dir: %s", line);
            return 2;
        }
        judge(dir, replies);
        free(dir);
    }
    free(line);
    return 0;
}
