/* softaff — tests of the domain XML reader. */
#define G_LOG_DOMAIN "test-domain"

#include <string.h>

#include "sa-error.h"
#include "sa-metadata.h"

static char *read_data(const char *name, gsize *len)
{
    const char *dir = g_getenv("SOFTAFF_TEST_DATA");
    g_autoptr(GError) error = NULL;
    char *xml = NULL;

    g_assert_nonnull(dir);
    g_autofree char *path = g_build_filename(dir, "xml", name, NULL);
    g_assert_true(g_file_get_contents(path, &xml, len, &error));
    g_assert_no_error(error);
    return xml;
}

static SaDomainXml *parse_file(const char *name)
{
    gsize len = 0;
    g_autofree char *xml = read_data(name, &len);
    g_autoptr(GError) error = NULL;
    SaDomainXml *d = sa_domain_xml_parse(xml, len, &error);

    g_assert_no_error(error);
    g_assert_nonnull(d);
    return d;
}

static void assert_cpuset(const SaCpuSet *set, const char *expected)
{
    g_assert_nonnull(set);
    g_autofree char *text = sa_cpuset_format(set);
    g_assert_cmpstr(text, ==, expected);
}

/* A minimal domain around the given inner XML. */
static SaDomainXml *parse_inner(const char *inner, GError **error)
{
    g_autofree char *xml = g_strdup_printf("<domain type='kvm'><name>t</name>%s</domain>", inner);
    return sa_domain_xml_parse(xml, strlen(xml), error);
}

static void parse_inner_fails(const char *inner, int code, const char *message)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaDomainXml) d = parse_inner(inner, &error);

    g_assert_null(d);
    g_assert_error(error, SA_ERROR, code);
    g_test_message("%s", error->message);
    if (message != NULL)
        g_assert_cmpstr(error->message, ==, message);
    g_assert_true(g_str_has_prefix(error->message, "domain XML: "));
}

static void test_full(void)
{
    g_autoptr(SaDomainXml) d = parse_file("domain-full.xml");

    g_assert_cmpstr(d->name, ==, "web-01");
    g_assert_cmpstr(d->uuid, ==, "6b0e6a3e-2c1f-4d0a-9b1e-1f2a3b4c5d6e");
    g_assert_cmpuint(d->n_vcpus, ==, 4);                                       /* current= */
    g_assert_cmpuint(d->memory_bytes, ==, G_GUINT64_CONSTANT(4194304) * 1024); /* currentMemory */
    assert_cpuset(d->vcpu_cpuset, "0-2,4-7");                                  /* "0-7,^3" */
    g_assert_nonnull(d->vcpupin);
    g_assert_cmpuint(d->vcpupin->len, ==, 4);
    assert_cpuset(g_ptr_array_index(d->vcpupin, 0), "0-1");
    g_assert_null(g_ptr_array_index(d->vcpupin, 1));
    assert_cpuset(g_ptr_array_index(d->vcpupin, 2), "4,6");
    g_assert_null(g_ptr_array_index(d->vcpupin, 3));
    assert_cpuset(d->emulatorpin, "7");

    /* The softaff element is found by namespace; the other "affinity" is ignored. */
    g_assert_true(d->has_metadata);
    g_assert_true(d->has_element);
    g_assert_cmpuint(d->metadata_attrs, ==,
                     SA_METADATA_HAS_MODE | SA_METADATA_HAS_PREFERRED | SA_METADATA_HAS_SOFTNESS);
    g_assert_null(d->record.own);
    g_assert_no_error(d->metadata_error);
    g_assert_cmpint(d->metadata.mode, ==, SA_MODE_STRICT);
    g_assert_cmpint(d->metadata.preferred, ==, 1);
    g_assert_cmpint(d->metadata.softness, ==, 30);
    g_assert_cmpint(d->metadata.assigned, ==, 1);
}

static void test_plain(void)
{
    g_autoptr(SaDomainXml) d = parse_file("domain-plain.xml");

    g_assert_cmpstr(d->name, ==, "plain");
    g_assert_cmpuint(d->n_vcpus, ==, 2);
    g_assert_cmpuint(d->memory_bytes, ==, G_GUINT64_CONSTANT(512) * 1024 * 1024);
    g_assert_null(d->vcpu_cpuset);
    g_assert_null(d->vcpupin);
    g_assert_null(d->emulatorpin);
    g_assert_null(d->iothread_ids);
    g_assert_null(d->iothreadpin);
    g_assert_false(d->has_metadata);
    g_assert_false(d->has_element);
    g_assert_null(d->metadata_error);
    g_assert_cmpint(d->metadata.mode, ==, SA_MODE_SOFT);
    g_assert_cmpint(d->metadata.preferred, ==, -1);
    g_assert_cmpint(d->metadata.softness, ==, -1);
    g_assert_null(d->title);
    g_assert_null(d->description);
    g_assert_null(d->nova_flavor);
    g_assert_false(d->has_numatune);
}

/* <numatune>: the user placed the memory (the mover leaves such a VM alone). */
static void test_numatune(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaDomainXml) d = parse_inner(
        "<vcpu>2</vcpu><numatune><memory mode='preferred' nodeset='1'/></numatune>", &error);

    g_assert_no_error(error);
    g_assert_true(d->has_numatune);
    g_autoptr(SaDomainXml) plain = parse_inner("<vcpu>2</vcpu><cputune/>", &error);
    g_assert_no_error(error);
    g_assert_false(plain->has_numatune);
}

/* An invalid softaff element does not fail the parse. */
static void test_bad_metadata(void)
{
    g_autoptr(SaDomainXml) d = parse_file("domain-bad-metadata.xml");

    g_assert_cmpstr(d->name, ==, "bad-meta");
    g_assert_cmpuint(d->n_vcpus, ==, 1);
    g_assert_cmpuint(d->memory_bytes, ==, G_GUINT64_CONSTANT(1024) * 1024 * 1024); /* KiB */
    g_assert_true(d->has_metadata);
    g_assert_error(d->metadata_error, SA_ERROR, SA_ERROR_RANGE);
    g_assert_cmpstr(d->metadata_error->message, ==,
                    "softaff metadata: softness=\"150\" is out of range (allowed: 0-100)");
}

static void test_two_metadata(void)
{
    g_autoptr(SaDomainXml) d = parse_file("domain-two-metadata.xml");

    g_assert_cmpuint(d->memory_bytes, ==, G_GUINT64_CONSTANT(2) << 30);
    g_assert_true(d->has_metadata);
    g_assert_error(d->metadata_error, SA_ERROR, SA_ERROR_PARSE);
    g_assert_cmpstr(d->metadata_error->message, ==,
                    "softaff metadata: 2 elements in namespace urn:softaff:domain:1 under "
                    "<metadata> (allowed: one <affinity>)");
}

static void test_metadata_wrong_name(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaDomainXml) d = parse_inner(
        "<vcpu>1</vcpu><metadata><s:pin xmlns:s='urn:softaff:domain:1'/></metadata>", &error);

    g_assert_no_error(error);
    g_assert_true(d->has_metadata);
    g_assert_error(d->metadata_error, SA_ERROR, SA_ERROR_PARSE);
    g_assert_cmpstr(d->metadata_error->message, ==,
                    "softaff metadata: element <pin> is not known (expected <affinity>)");
}

/* Inside a domain XML only the namespace counts: a bare <affinity> under <metadata> is not
 * softaff's (libvirt drops un-namespaced metadata children when it parses a definition). */
static void test_metadata_bare_in_domain(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaDomainXml) d =
        parse_inner("<vcpu>1</vcpu><metadata><affinity preferred='1'/></metadata>", &error);

    g_assert_no_error(error);
    g_assert_false(d->has_metadata);
    g_assert_null(d->metadata_error);
    g_assert_cmpint(d->metadata.preferred, ==, -1);
}

/* softaffd's record: has_element for any element, has_metadata only for the user's. */
static void test_metadata_record(void)
{
    static const struct {
        const char *element;
        bool has_metadata;
        guint attrs;
        bool created;
        bool own;
    } cases[] = {
        {"<s:affinity xmlns:s='urn:softaff:domain:1'/>", true, 0, false, false},
        {"<s:affinity xmlns:s='urn:softaff:domain:1' mode='off'><softaffd assigned='2'/>"
         "</s:affinity>",
         true, SA_METADATA_HAS_MODE, false, false},
        /* Created by softaffd, nothing of the user's: not the user's settings. */
        {"<s:affinity xmlns:s='urn:softaff:domain:1'><s:softaffd created='yes' assigned='1'>"
         "<s:own vcpus='2'/></s:softaffd></s:affinity>",
         false, 0, true, true},
        /* Created, then the user set something: the user's. */
        {"<s:affinity xmlns:s='urn:softaff:domain:1' softness='10'><softaffd created='yes'>"
         "<own vcpus='2' cpuset='0-3'><vcpupin vcpu='1' cpuset='2'/></own></softaffd>"
         "</s:affinity>",
         true, SA_METADATA_HAS_SOFTNESS, true, true},
        {"<s:affinity xmlns:s='urn:softaff:domain:1' preferred='auto'><softaffd><own vcpus='1'/>"
         "</softaffd></s:affinity>",
         true, SA_METADATA_HAS_PREFERRED, false, true},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = NULL;
        g_autofree char *inner =
            g_strdup_printf("<vcpu>2</vcpu><metadata>%s</metadata>", cases[i].element);
        g_autoptr(SaDomainXml) d = parse_inner(inner, &error);

        g_test_message("%s", cases[i].element);
        g_assert_no_error(error);
        g_assert_null(d->metadata_error);
        g_assert_true(d->has_element);
        g_assert_cmpint(d->has_metadata, ==, cases[i].has_metadata);
        g_assert_cmpuint(d->metadata_attrs, ==, cases[i].attrs);
        g_assert_cmpint(d->record.created, ==, cases[i].created);
        g_assert_cmpint(d->record.own != NULL, ==, cases[i].own);
    }

    g_autoptr(GError) error = NULL;
    g_autoptr(SaDomainXml) d = parse_inner(
        "<vcpu>2</vcpu><metadata><s:affinity xmlns:s='urn:softaff:domain:1' softness='10'>"
        "<softaffd assigned='3'><own vcpus='2' cpuset='0-3'><vcpupin vcpu='1' cpuset='2'/>"
        "<iothreadpin iothread='4' cpuset='1'/></own></softaffd></s:affinity></metadata>",
        &error);
    g_assert_no_error(error);
    g_assert_cmpint(d->metadata.assigned, ==, 3);
    g_assert_cmpint(d->metadata.softness, ==, 10);
    g_assert_cmpuint(d->record.own->n_vcpus, ==, 2);
    assert_cpuset(d->record.own->vcpu_cpuset, "0-3");
    assert_cpuset(g_ptr_array_index(d->record.own->vcpupin, 1), "2");
    assert_cpuset(sa_own_pins_iothread(d->record.own, 4), "1");

    /* No element: neither. */
    g_autoptr(SaDomainXml) none = parse_inner("<vcpu>2</vcpu><metadata/>", &error);
    g_assert_false(none->has_element);
    g_assert_false(none->has_metadata);
    g_assert_null(none->record.own);
}

/* An invalid record makes the element invalid, like any other error in it. */
static void test_metadata_bad_record(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaDomainXml) d =
        parse_inner("<vcpu>2</vcpu><metadata><s:affinity xmlns:s='urn:softaff:domain:1'><softaffd "
                    "created='yes'><own vcpus='2'><vcpupin vcpu='2' cpuset='1'/></own></softaffd>"
                    "</s:affinity></metadata>",
                    &error);

    g_assert_no_error(error);
    g_assert_true(d->has_element);
    g_assert_true(d->has_metadata);
    g_assert_error(d->metadata_error, SA_ERROR, SA_ERROR_RANGE);
    g_assert_cmpstr(d->metadata_error->message, ==,
                    "softaff metadata: <vcpupin> vcpu=\"2\" is out of range (allowed: 0-1)");
    g_assert_null(d->record.own);
    g_assert_false(d->record.created);
}

/* Outside <metadata> the element means nothing. */
static void test_metadata_elsewhere(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaDomainXml) d = parse_inner(
        "<vcpu>1</vcpu><softaff:affinity xmlns:softaff='urn:softaff:domain:1' preferred='1'/>",
        &error);

    g_assert_no_error(error);
    g_assert_false(d->has_metadata);
    g_assert_null(d->metadata_error);
}

static void test_memory_units(void)
{
    static const struct {
        const char *unit;
        guint64 scale;
    } units[] = {
        {NULL, 1024},
        {"b", 1},
        {"bytes", 1},
        {"KB", 1000},
        {"k", 1024},
        {"KiB", 1024},
        {"MB", 1000000},
        {"M", 1024 * 1024},
        {"MiB", 1024 * 1024},
        {"GB", G_GUINT64_CONSTANT(1000000000)},
        {"G", G_GUINT64_CONSTANT(1) << 30},
        {"GiB", G_GUINT64_CONSTANT(1) << 30},
        {"TiB", G_GUINT64_CONSTANT(1) << 40},
        {"T", G_GUINT64_CONSTANT(1) << 40},
        {"PiB", G_GUINT64_CONSTANT(1) << 50},
        {"EiB", G_GUINT64_CONSTANT(1) << 60},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(units); i++) {
        g_autoptr(GError) error = NULL;
        g_autofree char *inner =
            units[i].unit != NULL
                ? g_strdup_printf("<vcpu>1</vcpu><memory unit='%s'>3</memory>", units[i].unit)
                : g_strdup("<vcpu>1</vcpu><memory>3</memory>");
        g_autoptr(SaDomainXml) d = parse_inner(inner, &error);
        g_test_message("unit %s", units[i].unit != NULL ? units[i].unit : "(none)");
        g_assert_no_error(error);
        g_assert_cmpuint(d->memory_bytes, ==, 3 * units[i].scale);
    }

    /* <currentMemory> wins over <memory>, in either order. */
    g_autoptr(GError) error = NULL;
    g_autoptr(SaDomainXml) d =
        parse_inner("<currentMemory unit='MiB'>5</currentMemory><vcpu>1</vcpu>"
                    "<memory unit='GiB'>1</memory>",
                    &error);
    g_assert_no_error(error);
    g_assert_cmpuint(d->memory_bytes, ==, 5 * 1024 * 1024);

    parse_inner_fails("<vcpu>1</vcpu><memory unit='furlongs'>1</memory>", SA_ERROR_PARSE,
                      "domain XML: <memory> unit \"furlongs\" is not known (allowed: b, bytes, "
                      "KB, k, KiB, MB, M, MiB, GB, G, GiB, TB, T, TiB, PB, P, PiB, EB, E, EiB)");
    parse_inner_fails("<vcpu>1</vcpu><memory unit='EiB'>16</memory>", SA_ERROR_RANGE,
                      "domain XML: <memory> \"16\" EiB is out of range (more than 2^64 bytes)");
    parse_inner_fails("<vcpu>1</vcpu><memory>99999999999999999999</memory>", SA_ERROR_RANGE,
                      "domain XML: <memory> \"99999999999999999999\" is out of range (allowed: "
                      "0-18446744073709551615)");
    parse_inner_fails("<vcpu>1</vcpu><memory>-1</memory>", SA_ERROR_PARSE,
                      "domain XML: <memory> \"-1\" is not a plain decimal number (allowed: "
                      "0-18446744073709551615)");
}

static void test_vcpu(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaDomainXml) d = parse_inner("<vcpu placement='static'>\n  16\n</vcpu>", &error);

    g_assert_no_error(error);
    g_assert_cmpuint(d->n_vcpus, ==, 16);

    parse_inner_fails("", SA_ERROR_PARSE, "domain XML: no <vcpu> element");
    parse_inner_fails("<vcpu>0</vcpu>", SA_ERROR_RANGE,
                      "domain XML: <vcpu> \"0\" is out of range (allowed: 1-16384)");
    parse_inner_fails("<vcpu>two</vcpu>", SA_ERROR_PARSE,
                      "domain XML: <vcpu> \"two\" is not a plain decimal number (allowed: "
                      "1-16384)");
    parse_inner_fails("<vcpu current='3'>2</vcpu>", SA_ERROR_RANGE,
                      "domain XML: <vcpu current> \"3\" is more than the maximum of 2 vCPUs");
    parse_inner_fails("<vcpu current=' 1'>2</vcpu>", SA_ERROR_PARSE,
                      "domain XML: <vcpu current> \" 1\" is not a plain decimal number (allowed: "
                      "1-16384)");
    parse_inner_fails("<vcpu cpuset='0-3,x'>2</vcpu>", SA_ERROR_PARSE, NULL);
}

static void test_cpusets(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaDomainXml) d = parse_inner("<vcpu current='2' cpuset='0-15,^1,^3'>8</vcpu><cputune>"
                                           "<vcpupin vcpu='5' cpuset='9'/></cputune>",
                                           &error);

    g_assert_no_error(error);
    assert_cpuset(d->vcpu_cpuset, "0,2,4-15");
    /* vcpupin reaches the highest pinned vCPU, beyond the current count. */
    g_assert_cmpuint(d->vcpupin->len, ==, 6);
    assert_cpuset(g_ptr_array_index(d->vcpupin, 5), "9");
    g_assert_null(g_ptr_array_index(d->vcpupin, 0));
    g_assert_null(d->emulatorpin);

    parse_inner_fails("<vcpu cpuset='^1'>1</vcpu>", SA_ERROR_PARSE,
                      "domain XML: <vcpu cpuset> \"^1\" names no CPU");
    parse_inner_fails("<vcpu cpuset='0-3,^'>1</vcpu>", SA_ERROR_PARSE,
                      "domain XML: <vcpu cpuset> \"0-3,^\" is not a cpuset");
    parse_inner_fails("<vcpu cpuset='0-3,^1-2'>1</vcpu>", SA_ERROR_PARSE,
                      "domain XML: <vcpu cpuset> \"0-3,^1-2\" is not a cpuset");
    parse_inner_fails("<vcpu cpuset=''>1</vcpu>", SA_ERROR_PARSE,
                      "domain XML: <vcpu cpuset> \"\" names no CPU");
    parse_inner_fails("<vcpu>2</vcpu><cputune><vcpupin vcpu='1' cpuset='1'/>"
                      "<vcpupin vcpu='1' cpuset='2'/></cputune>",
                      SA_ERROR_PARSE, "domain XML: more than one <vcpupin> for vcpu 1");
    parse_inner_fails("<vcpu>2</vcpu><cputune><vcpupin vcpu='1'/></cputune>", SA_ERROR_PARSE,
                      "domain XML: <vcpupin> needs both vcpu and cpuset attributes");
    parse_inner_fails("<vcpu>2</vcpu><cputune><vcpupin vcpu='x' cpuset='1'/></cputune>",
                      SA_ERROR_PARSE,
                      "domain XML: <vcpupin vcpu> \"x\" is not a plain decimal number (allowed: "
                      "0-16383)");
    parse_inner_fails("<vcpu>2</vcpu><cputune><emulatorpin cpuset='1'/><emulatorpin "
                      "cpuset='2'/></cputune>",
                      SA_ERROR_PARSE, "domain XML: more than one <emulatorpin>");
    parse_inner_fails("<vcpu>2</vcpu><cputune><emulatorpin/></cputune>", SA_ERROR_PARSE,
                      "domain XML: <emulatorpin> needs a cpuset attribute");
}

/* ids as a comma-separated list, for comparing. */
static char *format_ids(const GArray *ids)
{
    GString *s = g_string_new(NULL);

    for (guint i = 0; ids != NULL && i < ids->len; i++)
        g_string_append_printf(s, "%s%u", i > 0 ? "," : "", g_array_index(ids, guint, i));
    return g_string_free(s, FALSE);
}

static void assert_iothread_ids(const char *inner, const char *expected)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaDomainXml) d = parse_inner(inner, &error);

    g_test_message("%s", inner);
    g_assert_no_error(error);
    g_autofree char *ids = format_ids(d->iothread_ids);
    g_assert_cmpstr(ids, ==, expected);
    if (expected[0] == '\0') {
        g_assert_null(d->iothread_ids);
        g_assert_null(d->iothreadpin);
    } else {
        g_assert_nonnull(d->iothreadpin);
        g_assert_cmpuint(d->iothreadpin->len, ==, d->iothread_ids->len);
    }
}

/* I/O thread ids as libvirt numbers them, and their pins. */
static void test_iothreads(void)
{
    assert_iothread_ids("<vcpu>1</vcpu>", "");
    assert_iothread_ids("<vcpu>1</vcpu><iothreads>0</iothreads>", "");
    assert_iothread_ids("<vcpu>1</vcpu><iothreads>3</iothreads>", "1,2,3");
    /* Listed ids first, then the lowest free ones (what libvirt's test driver reports for the
     * same definition: 2, 7, 1, 3). */
    assert_iothread_ids("<vcpu>1</vcpu><iothreads>4</iothreads><iothreadids><iothread id='2'/>"
                        "<iothread id='7'/></iothreadids>",
                        "2,7,1,3");
    /* More ids than <iothreads> says, or no <iothreads>: every listed id counts. */
    assert_iothread_ids("<vcpu>1</vcpu><iothreads>1</iothreads><iothreadids><iothread id='5'/>"
                        "<iothread id='6'/></iothreadids>",
                        "5,6");
    assert_iothread_ids("<vcpu>1</vcpu><iothreadids><iothread id='9'/></iothreadids>", "9");

    /* Pins, whatever the element order; a pin for an unknown I/O thread is left out. */
    g_autoptr(GError) error = NULL;
    g_autoptr(SaDomainXml) d =
        parse_inner("<vcpu>2</vcpu><cputune><iothreadpin iothread='3' cpuset='4-5'/>"
                    "<iothreadpin iothread='8' cpuset='1'/><emulatorpin cpuset='0'/></cputune>"
                    "<iothreads>3</iothreads><iothreadids><iothread id='3'/></iothreadids>",
                    &error);
    g_assert_no_error(error);
    g_autofree char *ids = format_ids(d->iothread_ids);
    g_assert_cmpstr(ids, ==, "3,1,2");
    assert_cpuset(g_ptr_array_index(d->iothreadpin, 0), "4-5");
    g_assert_null(g_ptr_array_index(d->iothreadpin, 1));
    g_assert_null(g_ptr_array_index(d->iothreadpin, 2));
    assert_cpuset(d->emulatorpin, "0");

    parse_inner_fails("<vcpu>1</vcpu><iothreads>two</iothreads>", SA_ERROR_PARSE,
                      "domain XML: <iothreads> \"two\" is not a plain decimal number (allowed: "
                      "0-16384)");
    parse_inner_fails("<vcpu>1</vcpu><iothreads>16385</iothreads>", SA_ERROR_RANGE, NULL);
    parse_inner_fails("<vcpu>1</vcpu><iothreadids><iothread id='0'/></iothreadids>", SA_ERROR_RANGE,
                      "domain XML: <iothread id> \"0\" is out of range (allowed: 1-4294967295)");
    parse_inner_fails("<vcpu>1</vcpu><iothreadids><iothread/></iothreadids>", SA_ERROR_PARSE,
                      "domain XML: <iothread> needs an id attribute");
    parse_inner_fails("<vcpu>1</vcpu><iothreadids><iothread id='2'/><iothread id='2'/>"
                      "</iothreadids>",
                      SA_ERROR_PARSE, "domain XML: more than one <iothread> with id 2");
    parse_inner_fails("<vcpu>1</vcpu><iothreads>1</iothreads><cputune><iothreadpin "
                      "iothread='1' cpuset='1'/><iothreadpin iothread='1' cpuset='2'/></cputune>",
                      SA_ERROR_PARSE, "domain XML: more than one <iothreadpin> for iothread 1");
    parse_inner_fails("<vcpu>1</vcpu><iothreads>1</iothreads><cputune><iothreadpin "
                      "iothread='1'/></cputune>",
                      SA_ERROR_PARSE,
                      "domain XML: <iothreadpin> needs both iothread and cpuset attributes");
    parse_inner_fails("<vcpu>1</vcpu><iothreads>1</iothreads><cputune><iothreadpin "
                      "iothread='1' cpuset='x'/></cputune>",
                      SA_ERROR_PARSE, NULL);
}

static void test_invalid_documents(void)
{
    static const struct {
        const char *xml;
        const char *contains;
    } cases[] = {
        {"<domain><name>x</name><vcpu>1</vcpu>", "not well-formed XML"},
        {"<vm><name>x</name></vm>", "domain XML: root element is <vm> (expected <domain>)"},
        {"<d:domain xmlns:d='urn:x'><name>x</name><vcpu>1</vcpu></d:domain>", "with a namespace"},
        {"<domain><vcpu>1</vcpu></domain>", "domain XML: no <name> element"},
        {"<domain><name> </name><vcpu>1</vcpu></domain>", "domain XML: <name> is empty"},
        {"<domain><name>x</name><name>y</name><vcpu>1</vcpu></domain>", NULL},
        {"<domain type='kvm' type='xen'><name>x</name><vcpu>1</vcpu></domain>", "redefined"},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(SaDomainXml) d = sa_domain_xml_parse(cases[i].xml, strlen(cases[i].xml), &error);
        g_test_message("case %s", cases[i].xml);
        if (cases[i].contains == NULL) {
            /* Repeated simple elements: the first counts, like libvirt's XPath lookups. */
            g_assert_no_error(error);
            g_assert_cmpstr(d->name, ==, "x");
            continue;
        }
        g_assert_null(d);
        g_assert_error(error, SA_ERROR, SA_ERROR_PARSE);
        g_test_message("%s", error->message);
        g_assert_nonnull(strstr(error->message, cases[i].contains));
        g_assert_true(g_str_has_prefix(error->message, "domain XML: "));
    }

    {
        g_autoptr(GError) error = NULL;
        g_assert_null(sa_domain_xml_parse("", 0, &error));
        g_assert_error(error, SA_ERROR, SA_ERROR_PARSE);
        g_assert_cmpstr(error->message, ==, "domain XML: empty document");
    }
    {
        gsize len = 0;
        g_autofree char *xml = read_data("domain-external-entity.xml", &len);
        g_autoptr(GError) error = NULL;
        g_assert_null(sa_domain_xml_parse(xml, len, &error));
        g_assert_error(error, SA_ERROR, SA_ERROR_PARSE);
        g_assert_cmpstr(error->message, ==,
                        "domain XML: document type declarations (<!DOCTYPE>, entities) are not "
                        "allowed");
    }
    {
        gsize len = SA_XML_MAX_BYTES + 1;
        g_autofree char *xml = g_malloc0(len);
        g_autoptr(GError) error = NULL;
        memset(xml, ' ', len);
        g_assert_null(sa_domain_xml_parse(xml, len, &error));
        g_assert_error(error, SA_ERROR, SA_ERROR_RANGE);
    }
    {
        static const char latin1[] = "<domain><name>caf\xe9</name><vcpu>1</vcpu></domain>";
        g_autoptr(GError) error = NULL;
        g_assert_null(sa_domain_xml_parse(latin1, sizeof(latin1) - 1, &error));
        g_assert_error(error, SA_ERROR, SA_ERROR_PARSE);
        g_assert_nonnull(strstr(error->message, "not valid UTF-8"));
    }
}

/* Non-ASCII names survive; the metadata default namespace form works inside a domain too. */
static void test_utf8_name_and_default_ns(void)
{
    g_autoptr(GError) error = NULL;
    const char *xml = "<domain><name>caf\xc3\xa9-\xe2\x98\x83</name><vcpu>1</vcpu><metadata>"
                      "<affinity xmlns='urn:softaff:domain:1' mode='off'/></metadata></domain>";
    g_autoptr(SaDomainXml) d = sa_domain_xml_parse(xml, strlen(xml), &error);

    g_assert_no_error(error);
    g_assert_cmpstr(d->name, ==, "caf\xc3\xa9-\xe2\x98\x83");
    g_assert_true(d->has_metadata);
    g_assert_no_error(d->metadata_error);
    g_assert_cmpint(d->metadata.mode, ==, SA_MODE_OFF);
}

/* An OpenStack Nova guest as Nova defines it: its <nova:instance> under <metadata>, dedicated
 * CPUs pinned per vCPU. What a [rule NAME] matches comes out of it. */
#define NOVA_NS "http://openstack.org/xmlns/libvirt/nova/1.1"
static const char nova_domain[] =
    "<domain type='kvm' id='7'>\n"
    "  <name>instance-0000002a</name>\n"
    "  <uuid>3f1c9a52-8d2e-4b7a-a1c0-5e6f7a8b9c0d</uuid>\n"
    "  <title>  ci runner 7 </title>\n"
    "  <description>\n    builds for team ci\n    tier: gold\n  </description>\n"
    "  <metadata>\n"
    "    <nova:instance xmlns:nova='" NOVA_NS "'>\n"
    "      <nova:package version='27.1.0'/>\n"
    "      <nova:name>ci-runner-7</nova:name>\n"
    "      <nova:creationTime>2026-11-30 09:14:02</nova:creationTime>\n"
    "      <nova:flavor name='m1.large'>\n"
    "        <nova:memory>8192</nova:memory>\n"
    "        <nova:disk>80</nova:disk>\n"
    "        <nova:swap>0</nova:swap>\n"
    "        <nova:ephemeral>0</nova:ephemeral>\n"
    "        <nova:vcpus>4</nova:vcpus>\n"
    "      </nova:flavor>\n"
    "      <nova:owner>\n"
    "        <nova:user uuid='0c5b8f1e2d3a4b6c9e7f8a1b2c3d4e5f'>alice</nova:user>\n"
    "        <nova:project uuid='9a8b7c6d5e4f40312a1b2c3d4e5f6a7b'>ci</nova:project>\n"
    "      </nova:owner>\n"
    "      <nova:root type='image' uuid='5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a'/>\n"
    "      <nova:ports>\n"
    "        <nova:port uuid='2b3c4d5e-6f70-4182-93a4-b5c6d7e8f901'>\n"
    "          <nova:ip type='fixed' address='10.0.0.12' ipVersion='4'/>\n"
    "        </nova:port>\n"
    "      </nova:ports>\n"
    "    </nova:instance>\n"
    "  </metadata>\n"
    "  <memory unit='KiB'>8388608</memory>\n"
    "  <vcpu placement='static'>4</vcpu>\n"
    "  <cputune>\n"
    "    <shares>4096</shares>\n"
    "    <vcpupin vcpu='0' cpuset='4'/>\n"
    "    <vcpupin vcpu='1' cpuset='5'/>\n"
    "    <vcpupin vcpu='2' cpuset='6'/>\n"
    "    <vcpupin vcpu='3' cpuset='7'/>\n"
    "    <emulatorpin cpuset='4-7'/>\n"
    "  </cputune>\n"
    "  <sysinfo type='smbios'>\n"
    "    <system><entry name='manufacturer'>OpenStack Foundation</entry></system>\n"
    "  </sysinfo>\n"
    "  <os><type arch='x86_64' machine='pc-q35-8.2'>hvm</type></os>\n"
    "</domain>\n";

static void test_nova(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaDomainXml) d = sa_domain_xml_parse(nova_domain, strlen(nova_domain), &error);

    g_assert_no_error(error);
    g_assert_cmpstr(d->name, ==, "instance-0000002a");
    g_assert_cmpstr(d->nova_flavor, ==, "m1.large");
    g_assert_cmpstr(d->title, ==, "ci runner 7");
    g_assert_cmpstr(d->description, ==, "builds for team ci\n    tier: gold");
    /* Nova's element is not softaff's. */
    g_assert_false(d->has_element);
    g_assert_false(d->has_metadata);
    g_assert_no_error(d->metadata_error);
    g_assert_cmpuint(d->vcpupin->len, ==, 4);
    assert_cpuset(g_ptr_array_index(d->vcpupin, 3), "7");
}

/* The flavor of <metadata> inner XML, or NULL. */
static char *flavor_of(const char *metadata)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *inner = g_strdup_printf("<vcpu>1</vcpu><metadata>%s</metadata>", metadata);
    g_autoptr(SaDomainXml) d = parse_inner(inner, &error);
    g_assert_no_error(error);
    return g_strdup(d->nova_flavor);
}

static void assert_flavor(const char *metadata, const char *expected)
{
    g_autofree char *flavor = flavor_of(metadata);
    g_test_message("%s -> %s", metadata, flavor ? flavor : "(none)");
    g_assert_cmpstr(flavor, ==, expected);
}

/* By namespace URI, never by prefix; other Nova versions too; next to softaff's element. */
static void test_nova_namespaces(void)
{
    assert_flavor("<n:instance xmlns:n='" NOVA_NS "'><n:flavor name='a'/></n:instance>", "a");
    assert_flavor("<instance xmlns='" NOVA_NS "'><name>x</name><flavor name='b'/></instance>", "b");
    assert_flavor("<nova:instance xmlns:nova='http://openstack.org/xmlns/libvirt/nova/1.0'>"
                  "<nova:flavor name='old'/></nova:instance>",
                  "old");
    assert_flavor("<affinity xmlns='urn:softaff:domain:1' preferred='1'/>"
                  "<nova:instance xmlns:nova='" NOVA_NS "'><nova:flavor name='c'/></nova:instance>",
                  "c");
    /* The prefix "nova" alone means nothing. */
    assert_flavor("<nova:instance xmlns:nova='http://example.com/nova/1.1'>"
                  "<nova:flavor name='x'/></nova:instance>",
                  NULL);
    assert_flavor("<instance><flavor name='x'/></instance>", NULL);
    assert_flavor("<nova:instance xmlns:nova='http://openstack.org/xmlns/libvirt/nova'>"
                  "<nova:flavor name='x'/></nova:instance>",
                  NULL);
    /* A flavor outside the instance, or in another namespace than it, is not its flavor. */
    assert_flavor("<nova:flavor xmlns:nova='" NOVA_NS "' name='x'/>", NULL);
    assert_flavor("<nova:instance xmlns:nova='" NOVA_NS "'>"
                  "<o:flavor xmlns:o='http://openstack.org/xmlns/libvirt/nova/1.0' name='x'/>"
                  "</nova:instance>",
                  NULL);
    /* No name, or an empty one: no flavor. */
    assert_flavor("<nova:instance xmlns:nova='" NOVA_NS "'><nova:flavor/></nova:instance>", NULL);
    assert_flavor("<nova:instance xmlns:nova='" NOVA_NS "'><nova:flavor name=''/></nova:instance>",
                  NULL);
}

/* <title> and <description>: trimmed; empty ones are none. */
static void test_title_description(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaDomainXml) d = parse_inner(
        "<vcpu>1</vcpu><title>\n web &amp; db </title><description> </description>", &error);
    g_assert_no_error(error);
    g_assert_cmpstr(d->title, ==, "web & db");
    g_assert_null(d->description);
    g_assert_null(d->nova_flavor);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/domain/full", test_full);
    g_test_add_func("/domain/plain", test_plain);
    g_test_add_func("/domain/numatune", test_numatune);
    g_test_add_func("/domain/metadata/bad", test_bad_metadata);
    g_test_add_func("/domain/metadata/two", test_two_metadata);
    g_test_add_func("/domain/metadata/wrong-name", test_metadata_wrong_name);
    g_test_add_func("/domain/metadata/elsewhere", test_metadata_elsewhere);
    g_test_add_func("/domain/metadata/bare", test_metadata_bare_in_domain);
    g_test_add_func("/domain/metadata/record", test_metadata_record);
    g_test_add_func("/domain/metadata/bad-record", test_metadata_bad_record);
    g_test_add_func("/domain/memory-units", test_memory_units);
    g_test_add_func("/domain/vcpu", test_vcpu);
    g_test_add_func("/domain/cpusets", test_cpusets);
    g_test_add_func("/domain/iothreads", test_iothreads);
    g_test_add_func("/domain/invalid", test_invalid_documents);
    g_test_add_func("/domain/utf8-name-default-ns", test_utf8_name_and_default_ns);
    g_test_add_func("/domain/nova", test_nova);
    g_test_add_func("/domain/nova-namespaces", test_nova_namespaces);
    g_test_add_func("/domain/title-description", test_title_description);

    return g_test_run();
}
