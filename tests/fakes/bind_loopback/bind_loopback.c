/* For the project's local Ray test cluster only (tests/ray_cluster.py): every wildcard bind() becomes a
 * bind to the node's own loopback address.
 *
 * Ray's servers listen on every interface unless the node's address is exactly 127.0.0.1
 * (src/ray/raylet/node_manager.cc, Ray 2.x: node_manager_server_("NodeManager", port,
 * config.node_manager_address == "127.0.0.1"); src/ray/rpc/grpc_server.cc binds "0.0.0.0" otherwise), so
 * the test nodes on 127.0.0.2 and 127.0.0.3 (vLLM refuses nodes that share an IP) took 0.0.0.0: 5 of the
 * cluster's 12 listeners were reachable from the network. Loaded with LD_PRELOAD into each node's raylet
 * (and so every worker it starts), this binds 0.0.0.0 to GPULAYOUT_TEST_BIND_IP and [::] to its
 * IPv4-mapped form (or ::1 on an IPv6-only socket). Any other address is bound as asked.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
    static bind_fn real;
    if (!real) real = (bind_fn)dlsym(RTLD_NEXT, "bind");
    const char *ip = getenv("GPULAYOUT_TEST_BIND_IP");
    struct in_addr want;
    if (ip == NULL || addr == NULL || inet_pton(AF_INET, ip, &want) != 1) return real(fd, addr, len);
    if (addr->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        struct sockaddr_in a;
        memcpy(&a, addr, sizeof a);
        if (a.sin_addr.s_addr != htonl(INADDR_ANY)) return real(fd, addr, len);
        a.sin_addr = want;
        return real(fd, (const struct sockaddr *)&a, sizeof a);
    }
    if (addr->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 a;
        memcpy(&a, addr, sizeof a);
        if (!IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr)) return real(fd, addr, len);
        int v6only = 0;
        socklen_t l = sizeof v6only;
        if (getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &l) == 0 && v6only) {
            a.sin6_addr = in6addr_loopback;
        } else {
            memset(&a.sin6_addr, 0, sizeof a.sin6_addr);
            a.sin6_addr.s6_addr[10] = 0xff;
            a.sin6_addr.s6_addr[11] = 0xff;
            memcpy(&a.sin6_addr.s6_addr[12], &want, 4);
        }
        return real(fd, (const struct sockaddr *)&a, sizeof a);
    }
    return real(fd, addr, len);
}
