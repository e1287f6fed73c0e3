/* The no-op warm checker of the explorer-scale benchmark (bench/scale/bench.sh with
 * CHECKER=server; docs/checkers.md, "Warm: one server per worker"): the `true` of the
 * server protocol. Started once per worker by
 *   intact check BUNDLE --checker-server ./pass_server
 * it answers every request line on stdin with {"verdict":"pass"} on stdout, so a run
 * measures the explorer (exploring, building each state, the runner's round trip) without
 * a process start per state. It refuses a request of another protocol version (exit 2),
 * as the protocol asks of a server. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, stdin) > 0) {
        const char *p = strstr(line, "\"protocol\":");
        if (!p || atoi(p + strlen("\"protocol\":")) != 1) {
            fprintf(stderr, "pass_server: not a protocol 1 request: %s", line);
            return 2;
        }
        /* One reply per request, flushed: intact waits for it before the next state. */
        if (fputs("{\"verdict\":\"pass\"}\n", stdout) == EOF || fflush(stdout) != 0) return 1;
    }
    free(line);
    return 0;
}
