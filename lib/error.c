/* SPDX-License-Identifier: MIT */
/*
 * error.c - sluice_strerror() and sluice_err_name(), read from one table
 * generated from SLUICE_ERRORS in sluice/error.h, so codes, names and
 * messages cannot drift apart.
 */
#include <stddef.h>

#include "sluice/error.h"

struct error_row {
	const char *name;
	const char *msg;
};

/* Row v is the code -v; row 0 is success.  The values in SLUICE_ERRORS
 * are 1, 2, 3, ... in order, which the designated index keeps honest: a
 * gap leaves a row NULL (answered as unknown), a repeat fails to compile
 * under -Woverride-init. */
static const struct error_row rows[] = {
	[0] = { "SLUICE_OK", "success" },
#define SLUICE__ERR_ROW(name, value, msg) [value] = { "SLUICE_" #name, msg },
	SLUICE_ERRORS(SLUICE__ERR_ROW)
#undef SLUICE__ERR_ROW
};

static const struct error_row *row_of(int err)
{
	if (err > 0 || err < -(int)(sizeof(rows) / sizeof(rows[0]) - 1))
		return NULL;
	const struct error_row *r = &rows[-err];
	return r->name ? r : NULL;
}

const char *sluice_strerror(int err)
{
	const struct error_row *r = row_of(err);
	return r ? r->msg : "unknown error";
}

const char *sluice_err_name(int err)
{
	const struct error_row *r = row_of(err);
	return r ? r->name : "SLUICE_UNKNOWN";
}
