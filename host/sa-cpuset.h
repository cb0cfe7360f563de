/* softaff — a set of CPU numbers, with cpulist ("0-3,8,10-11") parsing and formatting.
 *
 * Sets grow on demand; any CPU number below SA_CPUSET_MAX is accepted. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>

G_BEGIN_DECLS

#define SA_CPUSET_MAX 8192

typedef struct SaCpuSet SaCpuSet;

SaCpuSet *sa_cpuset_new(void);
SaCpuSet *sa_cpuset_copy(const SaCpuSet *set);
void sa_cpuset_free(SaCpuSet *set);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SaCpuSet, sa_cpuset_free)

/* Parses a kernel/libvirt cpulist. Whitespace around the text (a trailing newline) is allowed;
 * "" and "\n" give an empty set. Anything else that is not a cpulist is an error naming the text.
 */
SaCpuSet *sa_cpuset_parse(const char *text, GError **error);
/* Canonical cpulist, ranges merged: "0-3,8". The empty set formats as "". */
char *sa_cpuset_format(const SaCpuSet *set);

void sa_cpuset_clear(SaCpuSet *set);
void sa_cpuset_add(SaCpuSet *set, guint cpu);
void sa_cpuset_add_range(SaCpuSet *set, guint first, guint last);
void sa_cpuset_remove(SaCpuSet *set, guint cpu);
bool sa_cpuset_has(const SaCpuSet *set, guint cpu);
guint sa_cpuset_count(const SaCpuSet *set);
bool sa_cpuset_is_empty(const SaCpuSet *set);
bool sa_cpuset_equal(const SaCpuSet *a, const SaCpuSet *b);
bool sa_cpuset_is_subset(const SaCpuSet *sub, const SaCpuSet *super);
bool sa_cpuset_intersects(const SaCpuSet *a, const SaCpuSet *b);
/* dst = src */
void sa_cpuset_assign(SaCpuSet *dst, const SaCpuSet *src);
/* dst |= src, dst &= src, dst &= ~src */
void sa_cpuset_union(SaCpuSet *dst, const SaCpuSet *src);
void sa_cpuset_intersect(SaCpuSet *dst, const SaCpuSet *src);
void sa_cpuset_subtract(SaCpuSet *dst, const SaCpuSet *src);
/* Iteration: for (int c = sa_cpuset_next(s, -1); c >= 0; c = sa_cpuset_next(s, c)) */
int sa_cpuset_next(const SaCpuSet *set, int prev);
/* Highest CPU in the set, or -1 when empty. */
int sa_cpuset_last(const SaCpuSet *set);

/* libvirt cpumap: bit c of byte c/8; maplen bytes are written (CPUs beyond are dropped). */
void sa_cpuset_to_cpumap(const SaCpuSet *set, unsigned char *map, size_t maplen);
SaCpuSet *sa_cpuset_from_cpumap(const unsigned char *map, size_t maplen);

G_END_DECLS
