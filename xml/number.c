/* softaff — strict number parsing and error-message quoting for the xml/ parsers. */
#define G_LOG_DOMAIN "softaff-xml"

#include "sa-xml-private.h"

#include <string.h>

SaXmlNumber sa_xml_parse_number(const char *text, guint64 max, guint64 *out)
{
    guint64 value = 0;
    bool too_big = false;

    if (text == NULL || text[0] == '\0')
        return SA_XML_NUMBER_SYNTAX;
    if (text[0] == '0' && text[1] != '\0')
        return SA_XML_NUMBER_SYNTAX;
    for (const char *p = text; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            return SA_XML_NUMBER_SYNTAX;
        guint digit = (guint)(*p - '0');
        /* Keep scanning after an overflow: "99999999999999999999x" is a syntax error. max -
         * digit would wrap for a single digit above a small max ("2" for 0-1). */
        if (too_big || digit > max || value > (max - digit) / 10)
            too_big = true;
        else
            value = value * 10 + digit;
    }
    if (too_big)
        return SA_XML_NUMBER_RANGE;
    *out = value;
    return SA_XML_NUMBER_OK;
}

#define QUOTE_MAX_CHARS 64

char *sa_xml_quote(const char *text)
{
    if (text == NULL)
        return g_strdup("");

    glong n_chars = g_utf8_strlen(text, -1);
    g_autofree char *cut = NULL;
    const char *src = text;
    if (n_chars > QUOTE_MAX_CHARS) {
        const char *end = g_utf8_offset_to_pointer(text, QUOTE_MAX_CHARS);
        cut = g_strndup(text, (gsize)(end - text));
        src = cut;
    }

    /* Escape ASCII control characters, '"' and '\\'; keep other UTF-8 as it is. */
    g_autofree char *keep = g_malloc(128 + 1);
    gsize k = 0;
    for (int c = 0x80; c <= 0xff; c++)
        keep[k++] = (char)c;
    keep[k] = '\0';
    char *escaped = g_strescape(src, keep);

    if (cut != NULL) {
        char *with_ellipsis = g_strconcat(escaped, "...", NULL);
        g_free(escaped);
        return with_ellipsis;
    }
    return escaped;
}
