/* softaff — libFuzzer target: QMP framing and classification (qmp/qmp-message.c).
 *
 * The input is fed once whole and once in chunks whose sizes come from the input itself;
 * both must give the same messages (kind and JSON text) and the same final verdict: framing
 * must not depend on how the bytes arrive. */
#define G_LOG_DOMAIN "fuzz-qmp"

#include <glib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sa-qmp.h"

#define MAX_MESSAGE 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every message as "kind text", then "error" or "more" (incomplete) or "end". */
static GPtrArray *run(const uint8_t *data, size_t size, bool chunked)
{
    GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(SaQmpParser) p = sa_qmp_parser_new(MAX_MESSAGE);
    size_t pos = 0;
    guint8 seed = size > 0 ? data[0] : 1;
    bool failed = false;
    while (pos < size && !failed) {
        size_t n = size - pos;
        if (chunked) {
            seed = (guint8)(seed * 31 + 7);
            n = MIN(n, (size_t)(seed % 17) + 1);
        }
        sa_qmp_parser_feed(p, (const char *)data + pos, n);
        pos += n;
        for (;;) {
            g_autoptr(GError) error = NULL;
            g_autoptr(SaQmpMessage) m = sa_qmp_parser_next(p, &error);
            if (!m) {
                if (error) {
                    g_assert_true(error->message[0] != '\0');
                    failed = true;
                }
                break;
            }
            g_assert_nonnull(m->root);
            if (m->kind == SA_QMP_MSG_ERROR)
                g_assert_true(m->error_class && m->error_desc);
            if (m->kind == SA_QMP_MSG_EVENT)
                g_assert_nonnull(m->event);
            g_ptr_array_add(out, g_strdup_printf("%s %s", sa_qmp_message_kind_to_string(m->kind),
                                                 json_object_to_json_string_ext(
                                                     m->root, JSON_C_TO_STRING_PLAIN)));
        }
    }
    g_ptr_array_add(out, g_strdup(failed ? "error" : sa_qmp_parser_pending(p) ? "more" : "end"));
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autoptr(GPtrArray) whole = run(data, size, false);
    g_autoptr(GPtrArray) pieces = run(data, size, true);
    /* A chunked run may stop at an error a little earlier or later only if the error is the
     * same event: compare everything. */
    bool same = whole->len == pieces->len;
    for (guint i = 0; same && i < whole->len; i++)
        same = g_str_equal(g_ptr_array_index(whole, i), g_ptr_array_index(pieces, i));
    if (!same) {
        g_printerr("whole and chunked feeding disagree (%u vs %u results)\n", whole->len,
                   pieces->len);
        for (guint i = 0; i < MAX(whole->len, pieces->len); i++)
            g_printerr("  %s | %s\n", i < whole->len ? (char *)g_ptr_array_index(whole, i) : "-",
                       i < pieces->len ? (char *)g_ptr_array_index(pieces, i) : "-");
        abort();
    }
    return 0;
}
