/* softaff — libFuzzer target: the metadata element and domain XML parsers (xml/).
 * Every input goes through both parsers; an accepted metadata element must survive
 * sa_metadata_format() and parse back to the same values. */
#define G_LOG_DOMAIN "fuzz-metadata"

#include <glib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sa-metadata.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_metadata_round_trip(const SaMetadata *md)
{
    g_autofree char *text = sa_metadata_format(md);
    g_autoptr(GError) error = NULL;
    SaMetadata again;
    if (!sa_metadata_parse(text, strlen(text), &again, &error)) {
        g_printerr("formatted metadata does not parse back: %s\n%s\n", error->message, text);
        abort();
    }
    if (again.mode != md->mode || again.preferred != md->preferred ||
        again.softness != md->softness || again.assigned != md->assigned) {
        g_printerr("metadata changed through format/parse: %s\n", text);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *xml = (const char *)data;

    g_autoptr(GError) error = NULL;
    SaMetadata md;
    if (sa_metadata_parse(xml, size, &md, &error))
        check_metadata_round_trip(&md);
    g_clear_error(&error);

    g_autoptr(SaDomainXml) dom = sa_domain_xml_parse(xml, size, &error);
    if (dom && dom->has_metadata && !dom->metadata_error)
        check_metadata_round_trip(&dom->metadata);
    return 0;
}
