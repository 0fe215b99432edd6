/*
 * error.c - sluice_strerror() and sluice_err_name(), generated from the
 * SLUICE_ERRORS table in sluice/error.h so codes, names and messages cannot
 * drift apart.
 */
#include "sluice/error.h"

const char *sluice_strerror(int err)
{
	switch (err) {
	case 0:
		return "success";
#define SLUICE__ERR_MSG(name, value, msg) \
	case -(value):                    \
		return msg;
		SLUICE_ERRORS(SLUICE__ERR_MSG)
#undef SLUICE__ERR_MSG
	}
	return "unknown error";
}

const char *sluice_err_name(int err)
{
	switch (err) {
	case 0:
		return "SLUICE_OK";
#define SLUICE__ERR_NAME(name, value, msg) \
	case -(value):                     \
		return "SLUICE_" #name;
		SLUICE_ERRORS(SLUICE__ERR_NAME)
#undef SLUICE__ERR_NAME
	}
	return "SLUICE_UNKNOWN";
}
