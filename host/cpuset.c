/* softaff — CPU sets: a growable bitmap of 64-bit words.
 *
 * The per-tick code calls has/add/count/equal/next very often, so none of those allocate
 * (add grows the bitmap only when a CPU beyond the current capacity is added). */
#define G_LOG_DOMAIN "softaff-cpuset"

#include "sa-cpuset.h"

#include <errno.h>
#include <string.h>

#include "sa-error.h"

#define WORD_BITS 64u
#define WORD_OF(cpu) ((cpu) / WORD_BITS)
#define BIT_OF(cpu) (G_GUINT64_CONSTANT(1) << ((cpu) % WORD_BITS))
#define MAX_WORDS (SA_CPUSET_MAX / WORD_BITS)

struct SaCpuSet {
    guint64 *words;
    guint nwords; /* allocated words; bits beyond are zero */
};

SaCpuSet *sa_cpuset_new(void)
{
    return g_new0(SaCpuSet, 1);
}

SaCpuSet *sa_cpuset_copy(const SaCpuSet *set)
{
    SaCpuSet *copy = sa_cpuset_new();

    g_return_val_if_fail(set != NULL, copy);
    sa_cpuset_assign(copy, set);
    return copy;
}

void sa_cpuset_free(SaCpuSet *set)
{
    if (set == NULL)
        return;
    g_free(set->words);
    g_free(set);
}

/* Makes room for at least nwords words (never shrinks). */
static void reserve(SaCpuSet *set, guint nwords)
{
    guint n;

    if (nwords <= set->nwords)
        return;
    n = MAX(nwords, set->nwords * 2);
    n = MIN(n, MAX_WORDS);
    n = MAX(n, nwords);
    set->words = g_renew(guint64, set->words, n);
    memset(set->words + set->nwords, 0, (n - set->nwords) * sizeof(guint64));
    set->nwords = n;
}

void sa_cpuset_clear(SaCpuSet *set)
{
    g_return_if_fail(set != NULL);
    if (set->nwords > 0)
        memset(set->words, 0, set->nwords * sizeof(guint64));
}

void sa_cpuset_add(SaCpuSet *set, guint cpu)
{
    g_return_if_fail(set != NULL);
    g_return_if_fail(cpu < SA_CPUSET_MAX);
    reserve(set, WORD_OF(cpu) + 1);
    set->words[WORD_OF(cpu)] |= BIT_OF(cpu);
}

void sa_cpuset_add_range(SaCpuSet *set, guint first, guint last)
{
    guint fw, lw;

    g_return_if_fail(set != NULL);
    g_return_if_fail(first <= last);
    g_return_if_fail(last < SA_CPUSET_MAX);
    reserve(set, WORD_OF(last) + 1);
    fw = WORD_OF(first);
    lw = WORD_OF(last);
    for (guint w = fw; w <= lw; w++) {
        guint64 mask = ~G_GUINT64_CONSTANT(0);

        if (w == fw)
            mask &= ~(BIT_OF(first) - 1);
        if (w == lw && last % WORD_BITS != WORD_BITS - 1)
            mask &= (BIT_OF(last) << 1) - 1;
        set->words[w] |= mask;
    }
}

void sa_cpuset_remove(SaCpuSet *set, guint cpu)
{
    g_return_if_fail(set != NULL);
    if (WORD_OF(cpu) < set->nwords)
        set->words[WORD_OF(cpu)] &= ~BIT_OF(cpu);
}

bool sa_cpuset_has(const SaCpuSet *set, guint cpu)
{
    if (set == NULL || WORD_OF(cpu) >= set->nwords)
        return false;
    return (set->words[WORD_OF(cpu)] & BIT_OF(cpu)) != 0;
}

guint sa_cpuset_count(const SaCpuSet *set)
{
    guint n = 0;

    g_return_val_if_fail(set != NULL, 0);
    for (guint w = 0; w < set->nwords; w++)
        n += (guint)__builtin_popcountll(set->words[w]);
    return n;
}

bool sa_cpuset_is_empty(const SaCpuSet *set)
{
    g_return_val_if_fail(set != NULL, true);
    for (guint w = 0; w < set->nwords; w++)
        if (set->words[w] != 0)
            return false;
    return true;
}

static inline guint64 word_at(const SaCpuSet *set, guint w)
{
    return w < set->nwords ? set->words[w] : 0;
}

bool sa_cpuset_equal(const SaCpuSet *a, const SaCpuSet *b)
{
    guint n;

    g_return_val_if_fail(a != NULL && b != NULL, false);
    n = MAX(a->nwords, b->nwords);
    for (guint w = 0; w < n; w++)
        if (word_at(a, w) != word_at(b, w))
            return false;
    return true;
}

bool sa_cpuset_is_subset(const SaCpuSet *sub, const SaCpuSet *super)
{
    g_return_val_if_fail(sub != NULL && super != NULL, false);
    for (guint w = 0; w < sub->nwords; w++)
        if ((sub->words[w] & ~word_at(super, w)) != 0)
            return false;
    return true;
}

bool sa_cpuset_intersects(const SaCpuSet *a, const SaCpuSet *b)
{
    guint n;

    g_return_val_if_fail(a != NULL && b != NULL, false);
    n = MIN(a->nwords, b->nwords);
    for (guint w = 0; w < n; w++)
        if ((a->words[w] & b->words[w]) != 0)
            return true;
    return false;
}

void sa_cpuset_assign(SaCpuSet *dst, const SaCpuSet *src)
{
    g_return_if_fail(dst != NULL && src != NULL);
    if (dst == src)
        return;
    reserve(dst, src->nwords);
    if (src->nwords > 0)
        memcpy(dst->words, src->words, src->nwords * sizeof(guint64));
    if (dst->nwords > src->nwords)
        memset(dst->words + src->nwords, 0, (dst->nwords - src->nwords) * sizeof(guint64));
}

void sa_cpuset_union(SaCpuSet *dst, const SaCpuSet *src)
{
    g_return_if_fail(dst != NULL && src != NULL);
    /* Grow only as far as src has set bits. */
    guint used = src->nwords;
    while (used > 0 && src->words[used - 1] == 0)
        used--;
    reserve(dst, used);
    for (guint w = 0; w < used; w++)
        dst->words[w] |= src->words[w];
}

void sa_cpuset_intersect(SaCpuSet *dst, const SaCpuSet *src)
{
    g_return_if_fail(dst != NULL && src != NULL);
    for (guint w = 0; w < dst->nwords; w++)
        dst->words[w] &= word_at(src, w);
}

void sa_cpuset_subtract(SaCpuSet *dst, const SaCpuSet *src)
{
    guint n;

    g_return_if_fail(dst != NULL && src != NULL);
    n = MIN(dst->nwords, src->nwords);
    for (guint w = 0; w < n; w++)
        dst->words[w] &= ~src->words[w];
}

int sa_cpuset_next(const SaCpuSet *set, int prev)
{
    guint start, w;
    guint64 bits;

    g_return_val_if_fail(set != NULL, -1);
    if (prev < -1)
        prev = -1;
    start = (guint)(prev + 1);
    w = WORD_OF(start);
    if (w >= set->nwords)
        return -1;
    bits = set->words[w] & ~(BIT_OF(start) - 1);
    for (;;) {
        if (bits != 0)
            return (int)(w * WORD_BITS + (guint)__builtin_ctzll(bits));
        if (++w >= set->nwords)
            return -1;
        bits = set->words[w];
    }
}

int sa_cpuset_last(const SaCpuSet *set)
{
    g_return_val_if_fail(set != NULL, -1);
    for (guint w = set->nwords; w > 0; w--) {
        guint64 bits = set->words[w - 1];
        if (bits != 0)
            return (int)((w - 1) * WORD_BITS + (WORD_BITS - 1) - (guint)__builtin_clzll(bits));
    }
    return -1;
}

/* Reads a CPU number at *p: digits only, below SA_CPUSET_MAX. On failure *why says what was wrong.
 */
static bool parse_cpu(const char **p, guint *out, const char **why, const char *missing)
{
    const char *s = *p;
    guint64 v = 0;

    if (!g_ascii_isdigit(*s)) {
        *why = missing;
        return false;
    }
    while (g_ascii_isdigit(*s)) {
        v = v * 10 + (guint64)(*s - '0');
        if (v >= SA_CPUSET_MAX) {
            *why = "CPU number too large (the limit is " G_STRINGIFY(SA_CPUSET_MAX) ")";
            return false;
        }
        s++;
    }
    *p = s;
    *out = (guint)v;
    return true;
}

/* Items are "N", "N-M" or, as libvirt allows, "^N" / "^N-M" to remove CPUs added before. */
static bool parse_items(SaCpuSet *set, const char *p, const char *end, const char **why)
{
    for (;;) {
        guint first, last;
        bool exclude = false;

        if (*p == '^') {
            exclude = true;
            p++;
        }
        if (!parse_cpu(&p, &first, why, "expected a CPU number"))
            return false;
        last = first;
        if (p < end && *p == '-') {
            p++;
            if (!parse_cpu(&p, &last, why, "range without an end"))
                return false;
            if (last < first) {
                *why = "range ends before it starts";
                return false;
            }
        }
        if (exclude) {
            for (guint c = first; c <= last; c++)
                sa_cpuset_remove(set, c);
        } else {
            sa_cpuset_add_range(set, first, last);
        }
        if (p == end)
            return true;
        if (*p != ',') {
            *why = "unexpected character";
            return false;
        }
        if (++p == end) {
            *why = "trailing comma";
            return false;
        }
    }
}

SaCpuSet *sa_cpuset_parse(const char *text, GError **error)
{
    g_autoptr(SaCpuSet) set = sa_cpuset_new();
    const char *p, *end, *why = NULL;

    g_return_val_if_fail(text != NULL, NULL);
    p = text;
    end = text + strlen(text);
    while (p < end && g_ascii_isspace(*p))
        p++;
    while (end > p && g_ascii_isspace(end[-1]))
        end--;
    if (p == end)
        return g_steal_pointer(&set);
    if (!parse_items(set, p, end, &why)) {
        g_autofree char *shown = g_strescape(text, NULL);

        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "invalid cpulist \"%s\": %s", shown, why);
        return NULL;
    }
    return g_steal_pointer(&set);
}

char *sa_cpuset_format(const SaCpuSet *set)
{
    GString *out;
    int c;

    g_return_val_if_fail(set != NULL, NULL);
    out = g_string_new(NULL);
    c = sa_cpuset_next(set, -1);
    while (c >= 0) {
        int first = c, last = c;
        int n;

        while ((n = sa_cpuset_next(set, last)) == last + 1)
            last = n;
        if (out->len > 0)
            g_string_append_c(out, ',');
        if (first == last)
            g_string_append_printf(out, "%d", first);
        else
            g_string_append_printf(out, "%d-%d", first, last);
        c = n;
    }
    return g_string_free(out, FALSE);
}

void sa_cpuset_to_cpumap(const SaCpuSet *set, unsigned char *map, size_t maplen)
{
    g_return_if_fail(set != NULL);
    g_return_if_fail(map != NULL || maplen == 0);
    memset(map, 0, maplen);
    for (size_t i = 0; i < maplen; i++) {
        guint w = (guint)(i / 8);
        if (w >= set->nwords)
            break;
        map[i] = (unsigned char)(set->words[w] >> ((i % 8) * 8));
    }
}

SaCpuSet *sa_cpuset_from_cpumap(const unsigned char *map, size_t maplen)
{
    SaCpuSet *set = sa_cpuset_new();
    size_t n;

    g_return_val_if_fail(map != NULL || maplen == 0, set);
    n = MIN(maplen, (size_t)SA_CPUSET_MAX / 8);
    if (n > 0)
        reserve(set, (guint)((n + 7) / 8));
    for (size_t i = 0; i < n; i++)
        set->words[i / 8] |= (guint64)map[i] << ((i % 8) * 8);
    return set;
}
