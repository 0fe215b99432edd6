/*
 * rules/sluice.c - the `sluice` command.
 *
 *   sluice check FILE   exit 0 when FILE is a valid rule file; else every
 *                       error as "FILE:line:col: message" on stderr, exit 1
 *
 * Anything else (no subcommand, an unknown one, a missing or extra
 * argument) prints the usage line on stderr and exits 2; `sluice -h`
 * prints it on stdout and exits 0.  `explain` comes with the engine.
 */
#include <stdio.h>
#include <string.h>

#include "sluice/error.h"
#include "sluice/rules.h"

static const char usage[] = "usage: sluice check RULES.yaml\n";

static int check(const char *path)
{
	sluice_rules_t *r = NULL;
	sluice_rules_errors_t *e = NULL;
	int rc = sluice_rules_load_file(path, NULL, &r, &e);
	if (rc == 0) {
		printf("%s: %zu rule%s, valid\n", path, r->count, r->count == 1 ? "" : "s");
		sluice_rules_free(r);
		return 0;
	}
	if (rc < 0) {
		fprintf(stderr, "%s: %s (%s)\n", path, sluice_strerror(rc), sluice_err_name(rc));
		return 1;
	}
	char line[1024 + SLUICE_RULES_MSG_MAX];
	for (size_t i = 0; i < e->count; i++) {
		sluice_rules_error_format(e, i, line, sizeof(line));
		fprintf(stderr, "%s\n", line);
	}
	if (e->dropped)
		fprintf(stderr, "%s: %zu more error%s not shown\n", path, e->dropped,
		        e->dropped == 1 ? "" : "s");
	sluice_rules_errors_free(e);
	return 1;
}

int main(int argc, char **argv)
{
	if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		fputs(usage, stdout);
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "check") == 0)
		return check(argv[2]);
	fputs(usage, stderr);
	return 2;
}
