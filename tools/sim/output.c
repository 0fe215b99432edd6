/* SPDX-License-Identifier: MIT */
/*
 * output.c - what a run prints and writes: the comparison table, the
 * per-interval CSV, and the gnuplot script that draws it.
 *
 * DESIGN: the table is for people (aligned columns, one row per
 * algorithm); the CSV is for tools (one row per bin, two columns per
 * algorithm, exact times) and is what the plot is drawn from, so the
 * picture can always be redrawn or checked from the data.  gnuplot is
 * optional: it is looked up at run time (never at build time), and when it
 * is missing the CSV and the script are still written and the caller says
 * so.  The script is kept next to the plot: rerun `gnuplot FILE.gp` after
 * editing it.
 */
#include <errno.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim.h"

extern char **environ;

static double share_of(const sim_report_t *rep, uint64_t len)
{
	return (double)rep->limit * (double)len / (double)rep->window_ns;
}

void sim_print_table(FILE *f, const sim_report_t *rep)
{
	char w[32], s[32], h1[48], h2[48];
	sim_format_duration(rep->window_ns, w, sizeof(w));
	sim_format_duration(rep->short_ns, s, sizeof(s));
	double share = share_of(rep, rep->short_ns);
	int width = 24;
	for (size_t i = 0; i < rep->nalgo; i++)
		if ((int)strlen(rep->algos[i].label) > width)
			width = (int)strlen(rep->algos[i].label);

	fprintf(f, "%s\n", rep->title);
	fprintf(f, "  policy: L = %llu per W = %s.  worst W: most permits admitted in any\n"
	           "  interval of %s (every start, not only aligned); worst %s: the same for\n"
	           "  %s, against the limit's share L x %s / W = %.4g; over-limit = worst W / L.\n\n",
	        (unsigned long long)rep->limit, w, w, s, s, s, share);
	snprintf(h1, sizeof(h1), "worst %s", w);
	snprintf(h2, sizeof(h2), "worst %s", s);
	fprintf(f, "  %-*s %10s %10s %10s %12s %12s %9s %10s\n", width, "algorithm", "offered",
	        "admitted", "rejected", h1, h2, "x share", "over-limit");
	for (size_t i = 0; i < rep->nalgo; i++) {
		const sim_result_t *r = &rep->results[i];
		fprintf(f, "  %-*s %10llu %10llu %10llu %12llu %12llu %9.2f %10.2f\n", width,
		        rep->algos[i].label, (unsigned long long)r->offered,
		        (unsigned long long)r->admitted, (unsigned long long)r->rejected,
		        (unsigned long long)rep->worst_w[i].count,
		        (unsigned long long)rep->worst_s[i].count,
		        (double)rep->worst_s[i].count / share,
		        (double)rep->worst_w[i].count / (double)rep->limit);
	}

	int retries = 0, never = 0, keys = 0;
	for (size_t i = 0; i < rep->nalgo; i++) {
		retries |= rep->results[i].retried > 0 || rep->results[i].gave_up > 0;
		never |= rep->results[i].never > 0;
		keys |= rep->results[i].keys > 1;
	}
	if (retries) {
		fprintf(f, "\n  retries: offered = clients + retries; a client gives up after its last\n"
		           "  refused attempt; cut = retries that would come after the end of the run.\n\n");
		fprintf(f, "  %-*s %10s %10s %10s %10s\n", width, "algorithm", "clients", "retries",
		        "gave up", "cut");
		for (size_t i = 0; i < rep->nalgo; i++) {
			const sim_result_t *r = &rep->results[i];
			fprintf(f, "  %-*s %10llu %10llu %10llu %10llu\n", width, rep->algos[i].label,
			        (unsigned long long)r->clients, (unsigned long long)r->retried,
			        (unsigned long long)r->gave_up, (unsigned long long)r->cut);
		}
	}
	if (keys)
		fprintf(f, "\n  one limiter per key: the worst columns are the worst key's.\n");
	if (never)
		for (size_t i = 0; i < rep->nalgo; i++)
			if (rep->results[i].never)
				fprintf(f, "  %s: requests asking for more permits than it can ever grant "
				           "(SLUICE_ETOOBIG): %llu, counted as rejected.\n",
				        rep->algos[i].label, (unsigned long long)rep->results[i].never);
}

static void csv_label(FILE *f, const char *prefix, const char *label)
{
	fputs(",\"", f);
	fputs(prefix, f);
	for (const char *p = label; *p; p++) {
		if (*p == '"')
			fputc('"', f);
		fputc(*p, f);
	}
	fputc('"', f);
}

static size_t rows_of(const sim_report_t *rep)
{
	size_t rows = 0;
	for (size_t i = 0; i < rep->nalgo; i++)
		if (rep->results[i].nbins > rows)
			rows = rep->results[i].nbins;
	return rows;
}

int sim_write_csv(const char *path, const sim_report_t *rep, char *err, size_t errlen)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	fputs("t_s,bin_start_ns", f);
	for (size_t i = 0; i < rep->nalgo; i++) {
		csv_label(f, "offered:", rep->algos[i].label);
		csv_label(f, "admitted:", rep->algos[i].label);
	}
	fputc('\n', f);
	size_t rows = rows_of(rep);
	for (size_t b = 0; b < rows; b++) {
		uint64_t off = (uint64_t)b * rep->bin_ns;
		fprintf(f, "%llu.%09llu,%llu", (unsigned long long)(off / SIM_SEC),
		        (unsigned long long)(off % SIM_SEC),
		        (unsigned long long)(rep->start_ns + off));
		for (size_t i = 0; i < rep->nalgo; i++) {
			const sim_result_t *r = &rep->results[i];
			uint64_t o = b < r->nbins ? r->bin_offered[b] : 0;
			uint64_t a = b < r->nbins ? r->bin_admitted[b] : 0;
			fprintf(f, ",%llu,%llu", (unsigned long long)o, (unsigned long long)a);
		}
		fputc('\n', f);
	}
	if (fclose(f) != 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

int sim_find_gnuplot(char *buf, size_t len)
{
	const char *env = getenv("SLUICE_SIM_GNUPLOT");
	if (env) {
		if (!*env)
			return 0;
		snprintf(buf, len, "%s", env);
		return strchr(env, '/') ? access(env, X_OK) == 0 : 1;
	}
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		size_t n = strcspn(path, ":");
		snprintf(buf, len, "%.*s/gnuplot", (int)n, path);
		if (n > 0 && access(buf, X_OK) == 0)
			return 1;
		path += n + (path[n] == ':');
	}
	return 0;
}

/* a gnuplot single-quoted string: ' doubles */
static void gp_string(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++) {
		if (*s == '\'')
			fputc('\'', f);
		fputc(*s, f);
	}
	fputc('\'', f);
}

/* a gnuplot double-quoted string, for a title of several lines: \\ \" \n */
static void gp_lines(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '\n') {
			fputs("\\n", f);
			continue;
		}
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

static int ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && strcmp(s + a - b, suffix) == 0;
}

static int by_time(const void *a, const void *b)
{
	const sim_event_t *x = a, *y = b;
	return (x->t > y->t) - (x->t < y->t);
}

/* the plot's points per algorithm: enough for a 1200-pixel-wide panel */
#define PLOT_COLUMNS 2000

/*
 * Write the cumulative admitted permits of @r as the datablock $adm@i: one
 * (seconds since @start, permits) pair before and after each run of
 * admissions in one of PLOT_COLUMNS columns of @span, so a burst stays a
 * vertical step however many admissions a run holds.  Sets *@before to
 * the permits admitted before @worst_at (the worst window's start).
 * Return: 0, or -1 when out of memory.
 */
static int write_cumulative(FILE *f, size_t i, const sim_result_t *r, uint64_t start,
                            uint64_t span, uint64_t worst_at, uint64_t *before)
{
	sim_event_t *ev = r->adm;
	sim_event_t *copy = NULL;
	if (r->keys > 1 && r->nadm > 0) { /* sorted by key first: put in time order */
		copy = malloc(r->nadm * sizeof(*copy));
		if (!copy)
			return -1;
		memcpy(copy, r->adm, r->nadm * sizeof(*copy));
		qsort(copy, r->nadm, sizeof(*copy), by_time);
		ev = copy;
	}
	uint64_t col = span / PLOT_COLUMNS + 1, sum = 0;
	*before = 0;
	fprintf(f, "$adm%zu << EOD\n0 0\n", i);
	for (size_t j = 0; j < r->nadm;) {
		uint64_t c = (ev[j].t - start) / col;
		fprintf(f, "%.9f %llu\n", (double)(ev[j].t - start) / 1e9, (unsigned long long)sum);
		size_t k = j;
		for (; k < r->nadm && (ev[k].t - start) / col == c; k++) {
			if (ev[k].t < worst_at)
				*before = sum + ev[k].n;
			sum += ev[k].n;
		}
		fprintf(f, "%.9f %llu\n", (double)(ev[k - 1].t - start) / 1e9,
		        (unsigned long long)sum);
		j = k;
	}
	fprintf(f, "%.9f %llu\nEOD\n", (double)span / 1e9, (unsigned long long)sum);
	free(copy);
	return 0;
}

sim_plot_status_t sim_plot(const char *csv, const char *out, const sim_report_t *rep, char *err,
                           size_t errlen)
{
	(void)csv; /* the CSV is the per-bin table for tools; the plot needs every admission */
	int png = ends_with(out, ".png");
	if (!png && !ends_with(out, ".svg")) {
		snprintf(err, errlen, "%s: the plot file must end in .svg or .png", out);
		return SIM_PLOT_FAILED;
	}
	char script[4096];
	snprintf(script, sizeof(script), "%.*s.gp", (int)(strlen(out) - 4), out);
	FILE *f = fopen(script, "w");
	if (!f) {
		snprintf(err, errlen, "%s: %s", script, strerror(errno));
		return SIM_PLOT_FAILED;
	}
	/* the axis: the traffic's span, or up to the last admission a queue made later */
	uint64_t span = rep->duration_ns;
	for (size_t i = 0; i < rep->nalgo; i++)
		for (size_t j = 0; j < rep->results[i].nadm; j++)
			if (rep->results[i].adm[j].t - rep->start_ns > span)
				span = rep->results[i].adm[j].t - rep->start_ns;
	char w[32], d[32], sp[32];
	sim_format_duration(rep->window_ns, w, sizeof(w));
	sim_format_duration(rep->duration_ns, d, sizeof(d));
	sim_format_duration(span, sp, sizeof(sp));
	size_t rows = (rep->nalgo + 1) / 2, cols = rep->nalgo > 1 ? 2 : 1;
	int width = 600 * (int)cols, height = 110 + 250 * (int)rows;
	fprintf(f, "# sluice-sim: cumulative permits admitted, one panel per algorithm,\n"
	           "# against L x ceil(t / W) (what any limiter of L per any W can reach from\n"
	           "# the start) and the worst interval of W (shaded).  The data is in the\n"
	           "# datablocks below, every admission.  Rerun: gnuplot %s\n",
	        script);
	for (size_t i = 0; i < rep->nalgo; i++) {
		uint64_t before;
		if (write_cumulative(f, i, &rep->results[i], rep->start_ns, span,
		                     rep->worst_w[i].start_ns, &before) != 0) {
			fclose(f);
			snprintf(err, errlen, "out of memory");
			return SIM_PLOT_FAILED;
		}
		fprintf(f, "before%zu = %llu\n", i, (unsigned long long)before);
	}
	if (png)
		fprintf(f, "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
		           "  set terminal pngcairo noenhanced size %d,%d font 'sans,9'\n"
		           "} else {\n"
		           "  set terminal png noenhanced size %d,%d\n"
		           "}\n",
		        width, height, width, height);
	else
		fprintf(f, "set terminal svg noenhanced size %d,%d dynamic font 'sans,10' "
		           "background '#ffffff'\n",
		        width, height);
	fputs("set output ", f);
	gp_string(f, out);
	char title[1400];
	if (span > rep->duration_ns)
		snprintf(title, sizeof(title), "%s\ncumulative permits admitted over %s of traffic "
		         "(queued admissions until %s)", rep->title, d, sp);
	else
		snprintf(title, sizeof(title), "%s\ncumulative permits admitted over %s of traffic",
		         rep->title, d);
	fprintf(f, "\nset multiplot layout %zu,%zu title ", rows, cols);
	gp_lines(f, title);
	fprintf(f, "\nset grid\nset key top left opaque box\nset samples 4000\nset yrange [0:*]\nset offsets 0, 0, graph 0.45, 0\nset xrange [0:%.9f]\n"
	           "set xlabel 'virtual time (s)'\n"
	           "set ylabel 'permits admitted'\n"
	           "L = %llu\nW = %.9f\n",
	        (double)span / 1e9, (unsigned long long)rep->limit,
	        (double)rep->window_ns / 1e9);
	for (size_t i = 0; i < rep->nalgo; i++) {
		const sim_worst_t *wst = &rep->worst_w[i];
		double at = (double)(wst->start_ns - rep->start_ns) / 1e9;
		char head[512];
		snprintf(head, sizeof(head), "%s: worst %s %llu (%.2f L)%s", rep->algos[i].label, w,
		         (unsigned long long)wst->count, (double)wst->count / (double)rep->limit,
		         rep->results[i].keys > 1 ? ", the worst key's" : "");
		fputs("set title ", f);
		gp_string(f, head);
		fputc('\n', f);
		/* the worst window, shaded; single-key runs also get what it may hold */
		fprintf(f, "set object 1 rect from %.9f, graph 0 to %.9f, graph 1 fc rgb '#fde0dd' "
		           "fs solid 1.0 noborder behind\n",
		        at, at + (double)rep->window_ns / 1e9);
		fputs("plot ", f);
		fprintf(f, "L * ceil(x / W) with lines dt 2 lw 1 lc rgb '#777777' "
		           "title 'L x ceil(t/W): the most L per any W allows', \\\n"
		           "     $adm%zu using 1:2 with lines lw 2 lc rgb '#1f77b4' title 'admitted'",
		        i);
		if (rep->results[i].keys <= 1)
			fprintf(f, ", \\\n     [%.9f:%.9f] before%zu + L with lines lw 2 lc rgb '#d62728' "
			           "title 'the worst W (shaded): its start + L'",
			        at, at + (double)rep->window_ns / 1e9, i);
		fputs("\nunset object 1\n", f);
	}
	fputs("unset multiplot\n", f);
	if (fclose(f) != 0) {
		snprintf(err, errlen, "%s: %s", script, strerror(errno));
		return SIM_PLOT_FAILED;
	}

	char gp[4096];
	if (!sim_find_gnuplot(gp, sizeof(gp)))
		return SIM_PLOT_NO_GNUPLOT;
	if (unlink(out) != 0 && errno != ENOENT) {
		/* an old plot left in place would pass for this run's */
		snprintf(err, errlen, "%s: %s", out, strerror(errno));
		return SIM_PLOT_FAILED;
	}
	char *argv[] = { gp, script, NULL };
	pid_t pid;
	int rc = posix_spawnp(&pid, gp, NULL, NULL, argv, environ);
	if (rc != 0) {
		snprintf(err, errlen, "could not run %s: %s", gp, strerror(rc));
		return SIM_PLOT_FAILED;
	}
	int status;
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			snprintf(err, errlen, "waiting for %s: %s", gp, strerror(errno));
			return SIM_PLOT_FAILED;
		}
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(err, errlen, "%s failed on %s (exit status %d)", gp, script,
		         WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		return SIM_PLOT_FAILED;
	}
	if (access(out, R_OK) != 0) {
		snprintf(err, errlen, "%s ran but did not write %s", gp, out);
		return SIM_PLOT_FAILED;
	}
	return SIM_PLOT_DONE;
}
