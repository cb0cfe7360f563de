/* softaff — the metadata contract against real libvirt code: what sa_metadata_format writes goes
 * through virDomainSetMetadata, and what virDomainGetMetadata and virDomainGetXMLDesc give back
 * is read by sa_metadata_parse and sa_domain_xml_parse. Uses libvirt's test driver
 * (test:///default), which runs inside the library: no daemon, no VM. */
#define G_LOG_DOMAIN "test-libvirt"

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <string.h>

#include "sa-error.h"
#include "sa-metadata.h"

typedef struct {
    virConnectPtr conn;
    virDomainPtr dom;
} Fixture;

static void quiet_errors(void *user_data, virErrorPtr err)
{
    (void)user_data;
    g_test_message("libvirt: %s", err != NULL && err->message != NULL ? err->message : "?");
}

static void fixture_setup(Fixture *f, gconstpointer data)
{
    virSetErrorFunc(NULL, quiet_errors);
    /* A fresh connection is a fresh copy of the test driver's default state. */
    f->conn = virConnectOpen("test:///default");
    if (f->conn == NULL)
        g_error("cannot open libvirt's test driver (test:///default)");
    f->dom = virDomainLookupByName(f->conn, "test");
    g_assert_nonnull(f->dom);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
    virDomainFree(f->dom);
    virConnectClose(f->conn);
}

static void set_metadata(Fixture *f, const char *xml)
{
    int rc = virDomainSetMetadata(f->dom, VIR_DOMAIN_METADATA_ELEMENT, xml, SA_METADATA_KEY,
                                  SA_METADATA_NS, VIR_DOMAIN_AFFECT_LIVE);
    if (rc < 0)
        g_error("virDomainSetMetadata(%s): %s", xml, virGetLastErrorMessage());
}

static char *get_metadata(Fixture *f)
{
    char *xml = virDomainGetMetadata(f->dom, VIR_DOMAIN_METADATA_ELEMENT, SA_METADATA_NS,
                                     VIR_DOMAIN_AFFECT_LIVE);
    if (xml == NULL)
        g_error("virDomainGetMetadata: %s", virGetLastErrorMessage());
    return xml;
}

static SaDomainXml *get_domain(Fixture *f)
{
    g_autoptr(GError) error = NULL;
    char *xml = virDomainGetXMLDesc(f->dom, 0);
    g_assert_nonnull(xml);
    SaDomainXml *d = sa_domain_xml_parse(xml, strlen(xml), &error);
    free(xml);
    g_assert_no_error(error);
    g_assert_nonnull(d);
    return d;
}

/* format -> SetMetadata -> GetMetadata -> parse, and -> GetXMLDesc -> domain parse. */
static void test_round_trip(Fixture *f, gconstpointer data)
{
    static const SaMetadata cases[] = {
        {SA_MODE_SOFT, -1, -1, -1},
        {SA_MODE_SOFT, -1, 50, 1},
        {SA_MODE_STRICT, 0, 0, -1},
        {SA_MODE_OFF, 3, 100, 3},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *text = sa_metadata_format(&cases[i]);
        g_test_message("sent: %s", text);
        set_metadata(f, text);

        char *got = get_metadata(f);
        g_test_message("virDomainGetMetadata: %s", got);
        g_autoptr(GError) error = NULL;
        SaMetadata md;
        bool ok = sa_metadata_parse(got, strlen(got), &md, &error);
        free(got);
        g_assert_no_error(error);
        g_assert_true(ok);
        g_assert_cmpmem(&md, sizeof(md), &cases[i], sizeof(cases[i]));

        g_autoptr(SaDomainXml) d = get_domain(f);
        g_assert_cmpstr(d->name, ==, "test");
        g_assert_cmpuint(d->n_vcpus, >=, 1);
        g_assert_cmpuint(d->memory_bytes, >, 0);
        g_assert_true(d->has_metadata);
        g_assert_no_error(d->metadata_error);
        g_assert_cmpmem(&d->metadata, sizeof(d->metadata), &cases[i], sizeof(cases[i]));
    }
}

/* What an operator types with `virsh metadata ... --set`, bad values included: libvirt stores
 * it as it is, softaff names the problem on both paths. */
static void test_bad_value_from_operator(Fixture *f, gconstpointer data)
{
    set_metadata(f, "<affinity preferred=\"1\" softness=\"150\"/>");

    char *got = get_metadata(f);
    g_autoptr(GError) error = NULL;
    SaMetadata md;
    g_assert_false(sa_metadata_parse(got, strlen(got), &md, &error));
    free(got);
    g_assert_error(error, SA_ERROR, SA_ERROR_RANGE);
    g_assert_cmpstr(error->message, ==,
                    "softaff metadata: softness=\"150\" is out of range (allowed: 0-100)");

    g_autoptr(SaDomainXml) d = get_domain(f);
    g_assert_true(d->has_metadata);
    g_assert_error(d->metadata_error, SA_ERROR, SA_ERROR_RANGE);
    g_assert_cmpstr(d->metadata_error->message, ==, error->message);
}

/* A domain without the element. */
static void test_no_metadata(Fixture *f, gconstpointer data)
{
    char *got = virDomainGetMetadata(f->dom, VIR_DOMAIN_METADATA_ELEMENT, SA_METADATA_NS,
                                     VIR_DOMAIN_AFFECT_LIVE);
    g_assert_null(got);
    g_assert_cmpint(virGetLastErrorCode(), ==, VIR_ERR_NO_DOMAIN_METADATA);

    g_autoptr(SaDomainXml) d = get_domain(f);
    g_assert_false(d->has_metadata);
    g_assert_null(d->metadata_error);
}

/* softaffd's record goes through libvirt whole: as virDomainGetMetadata returns it and inside
 * the domain XML (where libvirt puts the namespace on the element; the children may come bare
 * or in it, the reader takes both). */
static void test_record_round_trip(Fixture *f, gconstpointer data)
{
    SaMetadata md;
    SaMetadataRecord rec = {.created = true, .own = sa_own_pins_new()};
    g_autoptr(SaCpuSet) set = sa_cpuset_new();

    sa_metadata_init(&md);
    md.assigned = 0;
    sa_cpuset_add_range(set, 0, 1);
    rec.own->n_vcpus = 2;
    rec.own->vcpu_cpuset = sa_cpuset_copy(set);
    sa_own_pins_set_vcpu(rec.own, 1, set);
    sa_own_pins_set_iothread(rec.own, 1, set);
    rec.own->emulatorpin = sa_cpuset_copy(set);
    g_autofree char *text = sa_metadata_format_full(&md, 0, &rec);
    set_metadata(f, text);

    char *got = get_metadata(f);
    g_test_message("virDomainGetMetadata: %s", got);
    SaMetadata back;
    SaMetadataRecord rec_back = {0};
    guint attrs = 0xff;
    g_autoptr(GError) error = NULL;
    g_assert_true(sa_metadata_parse_full(got, strlen(got), &back, &rec_back, &attrs, &error));
    g_assert_no_error(error);
    free(got);
    g_assert_cmpuint(attrs, ==, 0);
    g_assert_cmpint(back.assigned, ==, 0);
    g_assert_true(rec_back.created);
    g_assert_true(sa_own_pins_equal(rec_back.own, rec.own));

    g_autoptr(SaDomainXml) d = get_domain(f);
    g_assert_null(d->metadata_error);
    g_assert_true(d->has_element);
    g_assert_false(d->has_metadata); /* created, no user attribute */
    g_assert_true(d->record.created);
    g_assert_true(sa_own_pins_equal(d->record.own, rec.own));
    sa_metadata_record_clear(&rec_back);
    sa_metadata_record_clear(&rec);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    g_test_add("/libvirt/round-trip", Fixture, NULL, fixture_setup, test_round_trip,
               fixture_teardown);
    g_test_add("/libvirt/bad-value-from-operator", Fixture, NULL, fixture_setup,
               test_bad_value_from_operator, fixture_teardown);
    g_test_add("/libvirt/record-round-trip", Fixture, NULL, fixture_setup, test_record_round_trip,
               fixture_teardown);
    g_test_add("/libvirt/no-metadata", Fixture, NULL, fixture_setup, test_no_metadata,
               fixture_teardown);

    return g_test_run();
}
