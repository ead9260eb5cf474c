/* The libpcap limit of experiments/bench_analysis.py: every packet of a pcap read with
 * pcap_next_ex, nothing else (prints packets and bytes). */
#include <pcap.h>
#include <stdio.h>
int main(int argc, char **argv) {
    char err[PCAP_ERRBUF_SIZE];
    pcap_t *p = pcap_open_offline(argv[1], err);
    if (!p) { fprintf(stderr, "%s\n", err); return 2; }
    struct pcap_pkthdr *h; const u_char *data;
    unsigned long long packets = 0, bytes = 0;
    while (pcap_next_ex(p, &h, &data) == 1) { packets++; bytes += h->caplen + data[0] * 0; }
    printf("%llu %llu\n", packets, bytes);
    pcap_close(p);
    return 0;
}
