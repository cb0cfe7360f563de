/* softaff — libFuzzer target: the metadata element and domain XML parsers (xml/).
 * Every input goes through both parsers; an accepted metadata element must survive
 * sa_metadata_format() and sa_metadata_format_full() (with its record) and parse back to the
 * same values; an accepted domain XML goes through the hook's rewrite, whose output must be a
 * domain XML again, with no record left in it. */
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

/* format_full, then parse_full: the same values, user attributes and record. */
static void check_full_round_trip(const SaMetadata *md, guint attrs, const SaMetadataRecord *rec)
{
    g_autofree char *text = sa_metadata_format_full(md, attrs, rec);
    g_autoptr(GError) error = NULL;
    SaMetadata again;
    SaMetadataRecord rec_again = {0};
    guint attrs_again = 0;

    if (!sa_metadata_parse_full(text, strlen(text), &again, &rec_again, &attrs_again, &error)) {
        g_printerr("formatted metadata does not parse back: %s\n%s\n", error->message, text);
        abort();
    }
    /* An attribute that was present is written, and so parses back to the same value. */
    if (again.mode != md->mode || again.preferred != md->preferred ||
        again.softness != md->softness || again.assigned != md->assigned || attrs_again != attrs ||
        rec_again.created != rec->created || !sa_own_pins_equal(rec_again.own, rec->own)) {
        g_printerr("metadata or record changed through format_full/parse_full: %s\n", text);
        abort();
    }
    sa_metadata_record_clear(&rec_again);
}

static void check_rewrite(const char *xml, size_t size)
{
    g_autoptr(SaTopology) topo = g_new0(SaTopology, 1);
    g_autoptr(GError) error = NULL;
    g_autofree char *out = NULL;

    topo->layout = SA_LAYOUT_NODE;
    topo->partitions = g_ptr_array_new();
    if (!sa_domain_xml_rewrite_for_host(xml, size, topo, &out, &error) || out == NULL)
        return;
    g_autoptr(SaDomainXml) dom = sa_domain_xml_parse(out, strlen(out), &error);
    if (dom == NULL || dom->metadata_error != NULL || dom->record.own != NULL ||
        dom->metadata.assigned >= 0) {
        g_printerr("rewritten domain XML is not clean: %s\n%s\n",
                   error != NULL ? error->message : "record or assigned left", out);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *xml = (const char *)data;

    g_autoptr(GError) error = NULL;
    SaMetadata md;
    SaMetadataRecord rec = {0};
    guint attrs = 0;
    if (sa_metadata_parse_full(xml, size, &md, &rec, &attrs, &error)) {
        check_metadata_round_trip(&md);
        check_full_round_trip(&md, attrs, &rec);
    }
    sa_metadata_record_clear(&rec);
    g_clear_error(&error);

    g_autoptr(SaDomainXml) dom = sa_domain_xml_parse(xml, size, &error);
    if (dom && dom->has_element && !dom->metadata_error) {
        check_metadata_round_trip(&dom->metadata);
        check_full_round_trip(&dom->metadata, dom->metadata_attrs, &dom->record);
        check_rewrite(xml, size);
    }
    return 0;
}
