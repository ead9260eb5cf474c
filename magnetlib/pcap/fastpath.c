/* The pcap fast path's two per-packet loops in C: the record walk and the decode
 * of plain packets (Ethernet/SLL/loopback/raw IP, IPv4 or IPv6, TCP or UDP).
 *
 * Built on first use by magnetlib/native.py and called through ctypes (which lets
 * go of the GIL: fast.py decodes chunks on several threads).  fast.py keeps the
 * numpy version of both loops for machines without a compiler; the tests hold the
 * two, and the dpkt reader, to identical columns.  Anything this decoder does not
 * call plain (fragments, options it cannot see, truncation, other protocols) is
 * left to dpkt, exactly as the numpy version leaves it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { RECORD_HEADER = 16 };
/* Why a walk stopped: files.STOP_* */
enum { STOP_NONE, STOP_SHORT_HEADER, STOP_BOGUS_LENGTH, STOP_TRUNCATED };
/* columns.Flag */
enum { FLAG_UNKNOWN_LINK = 0x02, FLAG_BAD_RECORD = 0x20 };
enum { LINK_NULL = 0, LINK_ETHERNET = 1, LINK_LOOP = 108, LINK_SLL = 113, LINK_SLL2 = 276,
       LINK_IPV4 = 228, LINK_IPV6 = 229 };

/* One row of columns.PACKET_DTYPE; native.py checks the offsets against the dtype. */
struct packet {
	int64_t time_ns;
	uint32_t caplen, origlen, ip_len, payload, seq, ack;
	uint16_t sport, dport, flags;
	uint8_t ip_version, proto, tcp_flags, ip_tos, ip_ttl, unused;
	uint16_t ip_id, ip_frag_off;
	uint8_t saddr[16], daddr[16];
};
_Static_assert(sizeof(struct packet) == 80, "PACKET_DTYPE is 80 bytes");

static const int64_t layout[] = {
	offsetof(struct packet, time_ns), offsetof(struct packet, caplen),
	offsetof(struct packet, origlen), offsetof(struct packet, ip_len),
	offsetof(struct packet, payload), offsetof(struct packet, seq),
	offsetof(struct packet, ack), offsetof(struct packet, sport),
	offsetof(struct packet, dport), offsetof(struct packet, flags),
	offsetof(struct packet, ip_version), offsetof(struct packet, proto),
	offsetof(struct packet, tcp_flags), offsetof(struct packet, ip_tos),
	offsetof(struct packet, ip_ttl), offsetof(struct packet, ip_id),
	offsetof(struct packet, ip_frag_off), offsetof(struct packet, saddr),
	offsetof(struct packet, daddr),
};

/* The field offsets of struct packet, in PACKET_DTYPE's order; returns its size. */
int64_t magnet_packet_layout(int64_t *offsets, int64_t n)
{
	for (int64_t i = 0; i < n && i < (int64_t)(sizeof(layout) / sizeof(layout[0])); i++)
		offsets[i] = layout[i];
	return sizeof(struct packet);
}

static inline uint16_t be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static inline uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint32_t host32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
/* A record header's field, in the file's byte order. */
static inline uint32_t file32(const uint8_t *p, int swap)
{
	uint32_t v = host32(p);
	return swap ? __builtin_bswap32(v) : v;
}

/* Walk records from `off` until one starts at or after `bound` (fast.py's _Walker.walk
 * for one lane): offsets[] gets each whole record's start; out[0] where the walk
 * stopped, out[1] why (STOP_*).  Returns the records.  offsets[] must hold one per 16
 * bytes of [off, bound). */
int64_t magnet_pcap_walk(const uint8_t *data, int64_t size, int64_t off, int64_t bound, int swap,
			 int64_t max_caplen, int64_t *offsets, int64_t *out)
{
	int64_t n = 0;
	int kind;
	for (;;) {
		if (off >= bound) { kind = STOP_NONE; break; }
		if (size - off < RECORD_HEADER) { kind = STOP_SHORT_HEADER; break; }
		int64_t caplen = file32(data + off + 8, swap);
		if (caplen > max_caplen) { kind = STOP_BOGUS_LENGTH; break; }
		if (off + RECORD_HEADER + caplen > size) { kind = STOP_TRUNCATED; break; }
		offsets[n++] = off;
		off += RECORD_HEADER + caplen;
	}
	out[0] = off;
	out[1] = kind;
	return n;
}

static int is_vlan(uint16_t type)
{
	return type == 0x8100 || type == 0x88A8 || type == 0x9100 || type == 0x9200;
}

static int version_of_ethertype(uint16_t type)
{
	return type == 0x0800 ? 4 : type == 0x86DD ? 6 : 0;
}

/* The link header: the IP version it announces and the IP header's offset; 0 when the
 * packet is not plain (fast.py's _Columns.link). */
static int link_layer(const uint8_t *data, int64_t size, int64_t start, uint32_t caplen, int linktype,
		      int64_t *l3off)
{
	const uint8_t *s = data + start;
	int version;
	switch (linktype) {
	case LINK_ETHERNET: {
		if (start + 22 > size || be16(s + 12) <= 1500)
			return 0;
		uint16_t t1 = be16(s + 12), t2 = be16(s + 16), t3 = be16(s + 20);
		int vlan = is_vlan(t1), qinq = vlan && t2 == 0x8100;
		version = version_of_ethertype(qinq ? t3 : vlan ? t2 : t1);
		*l3off = 14 + 4 * vlan + 4 * qinq;
		break;
	}
	case LINK_SLL:
		if (start + 16 > size)
			return 0;
		version = version_of_ethertype(be16(s + 14));
		*l3off = 16;
		break;
	case LINK_SLL2:
		if (start + 20 > size)
			return 0;
		version = version_of_ethertype(be16(s));
		*l3off = 20;
		break;
	case LINK_NULL:
	case LINK_LOOP: {
		if (start + 4 > size)
			return 0;
		uint32_t fam = linktype == LINK_LOOP ? be32(s) : host32(s);
		if (linktype == LINK_NULL && (fam & 0xFFFF0000))
			fam = __builtin_bswap32(fam);        /* written by a host of the other order */
		version = fam == 2 ? 4 : (fam == 10 || fam == 24 || fam == 28 || fam == 30) ? 6 : 0;
		*l3off = 4;
		break;
	}
	default:                                            /* raw IP */
		if (start + 1 > size)
			return 0;
		version = linktype == LINK_IPV4 ? 4 : linktype == LINK_IPV6 ? 6 : s[0] >> 4;
		*l3off = 0;
		if (caplen < 1 || (version != 4 && version != 6))
			return 0;
	}
	return (int64_t)caplen >= *l3off ? version : 0;
}

static void mapped_v4(uint8_t *to, const uint8_t *from)
{
	memset(to, 0, 10);
	to[10] = to[11] = 0xFF;
	memcpy(to + 12, from, 4);
}

/* IP and transport columns of a plain packet; 0 (nothing written) for any other
 * (fast.py's _Columns.network). */
static int network_layer(const uint8_t *data, int64_t size, int64_t l3, int64_t room, int version,
			 struct packet *p)
{
	if (l3 + 40 > size)
		return 0;
	const uint8_t *ip = data + l3;
	int v4 = version == 4;
	int ihl = (ip[0] & 0x0F) * 4, len4 = be16(ip + 2), plen = be16(ip + 4);
	int hdr = v4 ? ihl : 40, length = v4 ? len4 : plen + 40, proto = v4 ? ip[9] : ip[6];
	if (ip[0] >> 4 != version)
		return 0;
	if (v4 ? ihl < 20 || (be16(ip + 6) & 0x3FFF) != 0 || len4 == 0 : plen == 0)
		return 0;
	int tcp = proto == 6;
	if ((!tcp && proto != 17) || room < hdr + (tcp ? 20 : 8) || l3 + hdr + 14 > size)
		return 0;
	const uint8_t *seg = ip + hdr;
	int thdr = tcp ? (seg[12] >> 4) * 4 : 8;
	if ((tcp && thdr < 20) || length < hdr + thdr)
		return 0;
	p->ip_version = (uint8_t)version;
	p->proto = (uint8_t)proto;
	p->ip_len = (uint32_t)length;
	p->payload = (uint32_t)(length - hdr - thdr);
	p->sport = be16(seg);
	p->dport = be16(seg + 2);
	p->seq = tcp ? be32(seg + 4) : 0;
	p->ack = tcp ? be32(seg + 8) : 0;
	p->tcp_flags = tcp ? seg[13] : 0;
	p->ip_tos = v4 ? ip[1] : (uint8_t)((ip[0] & 0x0F) << 4 | ip[1] >> 4);   /* IPv6 traffic class */
	p->ip_ttl = v4 ? ip[8] : ip[7];
	p->ip_id = v4 ? be16(ip + 4) : 0;
	p->ip_frag_off = v4 ? be16(ip + 6) : 0;
	if (v4) {
		mapped_v4(p->saddr, ip + 12);
		mapped_v4(p->daddr, ip + 16);
	} else {
		memcpy(p->saddr, ip + 8, 16);
		memcpy(p->daddr, ip + 24, 16);
	}
	return 1;
}

/* Decode the records at offsets[0..n) into zeroed rows out[]: the record header's
 * columns for every packet, the rest for plain ones (plain[i] = 1).  A link type
 * that is not `supported` only gets FLAG_UNKNOWN_LINK.  Returns the packets left for
 * dpkt. */
int64_t magnet_pcap_decode(const uint8_t *data, int64_t size, const int64_t *offsets, int64_t n,
			   int swap, int64_t frac_ns, int64_t frac_limit, int linktype, int supported,
			   struct packet *out, uint8_t *plain)
{
	int64_t left = 0;
	for (int64_t i = 0; i < n; i++) {
		const uint8_t *r = data + offsets[i];
		struct packet *p = out + i;
		uint32_t frac = file32(r + 4, swap);
		p->time_ns = (int64_t)file32(r, swap) * 1000000000 + (int64_t)frac * frac_ns;
		p->caplen = file32(r + 8, swap);
		p->origlen = file32(r + 12, swap);
		p->flags = p->origlen < p->caplen || frac >= frac_limit ? FLAG_BAD_RECORD : 0;
		if (!supported) {
			p->flags |= FLAG_UNKNOWN_LINK;
			plain[i] = 1;
			continue;
		}
		int64_t start = offsets[i] + RECORD_HEADER, l3off = 0;
		int version = link_layer(data, size, start, p->caplen, linktype, &l3off);
		plain[i] = version && network_layer(data, size, start + l3off, (int64_t)p->caplen - l3off,
						    version, p);
		left += !plain[i];
	}
	return left;
}

/* ------------------------------------------------------------------ flows --- */

/* A flow's key: proto, then the lower endpoint and the higher (address as two
 * network-order 64-bit words, port), as flows.KEY_COLUMNS. */
enum { KEY_WORDS = 7 };
struct flow_slot {
	uint64_t key[KEY_WORDS];
	int64_t id;                         /* -1: empty */
};
/* Flow ids by exact key, in an open-addressing table that doubles at half load. */
struct flow_index {
	struct flow_slot *slots;
	int64_t mask, flows;
};

struct flow_index *magnet_flows_new(void)
{
	struct flow_index *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->mask = 1023;
	t->slots = malloc(sizeof(struct flow_slot) * (t->mask + 1));
	if (!t->slots) {
		free(t);
		return NULL;
	}
	for (int64_t i = 0; i <= t->mask; i++)
		t->slots[i].id = -1;
	return t;
}

void magnet_flows_free(struct flow_index *t)
{
	if (t)
		free(t->slots);
	free(t);
}

static uint64_t key_hash(const uint64_t *key)
{
	uint64_t h = 0x9E3779B97F4A7C15ull;
	for (int i = 0; i < KEY_WORDS; i++) {
		h = (h ^ key[i]) * 0x9E3779B97F4A7C15ull;
		h ^= h >> 31;
	}
	return h;
}

static struct flow_slot *slot_of(struct flow_index *t, const uint64_t *key)
{
	for (uint64_t at = key_hash(key);; at++) {
		struct flow_slot *s = &t->slots[at & t->mask];
		if (s->id < 0 || !memcmp(s->key, key, sizeof(s->key)))
			return s;
	}
}

static int grow(struct flow_index *t)
{
	struct flow_index bigger = { .mask = 2 * t->mask + 1 };
	bigger.slots = malloc(sizeof(struct flow_slot) * (bigger.mask + 1));
	if (!bigger.slots)
		return -1;
	for (int64_t i = 0; i <= bigger.mask; i++)
		bigger.slots[i].id = -1;
	for (int64_t i = 0; i <= t->mask; i++)
		if (t->slots[i].id >= 0)
			*slot_of(&bigger, t->slots[i].key) = t->slots[i];
	free(t->slots);
	t->slots = bigger.slots;
	t->mask = bigger.mask;
	return 0;
}

static uint64_t address_word(const uint8_t *a)
{
	return (uint64_t)be32(a) << 32 | be32(a + 4);
}

/* The flow of each packet out[index[k]] (flows.FlowTable._ids): flow[k], and src_low[k]
 * when its source is the lower endpoint.  A flow not seen before gets the next id and
 * its key appended to new_keys (KEY_WORDS per flow).  Returns the new flows, or -1 when
 * memory ran out. */
int64_t magnet_flows_lookup(struct flow_index *t, const struct packet *packets, const int64_t *index,
			    int64_t n, int64_t *flow, uint8_t *src_low, uint64_t *new_keys)
{
	int64_t fresh = 0;
	for (int64_t k = 0; k < n; k++) {
		const struct packet *p = &packets[index[k]];
		uint64_t src[3] = { address_word(p->saddr), address_word(p->saddr + 8), p->sport };
		uint64_t dst[3] = { address_word(p->daddr), address_word(p->daddr + 8), p->dport };
		int low = src[0] != dst[0] ? src[0] < dst[0] : src[1] != dst[1] ? src[1] < dst[1]
			: src[2] <= dst[2];
		const uint64_t *lo = low ? src : dst, *hi = low ? dst : src;
		uint64_t key[KEY_WORDS] = { p->proto, lo[0], lo[1], lo[2], hi[0], hi[1], hi[2] };
		struct flow_slot *s = slot_of(t, key);
		if (s->id < 0) {
			if (2 * (t->flows + 1) > t->mask + 1) {
				if (grow(t))
					return -1;
				s = slot_of(t, key);
			}
			memcpy(s->key, key, sizeof(key));
			s->id = t->flows++;
			memcpy(new_keys + KEY_WORDS * fresh++, key, sizeof(key));
		}
		flow[k] = s->id;
		src_low[k] = (uint8_t)low;
	}
	return fresh;
}
