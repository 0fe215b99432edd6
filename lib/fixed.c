/*
 * fixed.c - fixed window: validation and the once-per-window slow path.
 *
 * DESIGN: two words.  `head` is the newest epoch (window number, now / W)
 * any thread has opened; it only moves forward, by CAS, so a clock read
 * from before it cannot reopen an old window.  `word` packs the low 32 bits
 * of an epoch with that epoch's count; every admission is one CAS on it.
 * A thread opens the word for epoch h only after seeing head == h, and head
 * only grows, so the word's epoch is never newer than head: that lets the
 * hot path tell an old word from a newer one without comparing wrapped tags.
 * Keeping the full epoch in head also spares the hot path a division: it
 * checks now < (head + 1) * W with one multiply.
 */
#include "sluice/error.h"
#include "sluice/fixed.h"

size_t sluice_fixed_size(void)
{
	return sizeof(sluice_fixed_t);
}

int sluice_fixed_init(sluice_fixed_t *f, const sluice_fixed_config_t *cfg)
{
	if (!f || !cfg)
		return -SLUICE_EINVAL;
	const sluice_clock_t *clock = cfg->clock ? cfg->clock : &sluice_clock_cached;
	if (clock->kind > SLUICE_CLOCK_MANUAL)
		return -SLUICE_ECLOCK;
	if (cfg->limit < 1 || cfg->limit > SLUICE_FIXED_LIMIT_MAX)
		return -SLUICE_ELIMIT;
	if (cfg->window_ns == 0)
		return -SLUICE_EWINDOW;
	if (sluice__clock_require_step(clock, cfg->window_ns) != 0)
		return -SLUICE_ERESOLUTION;

	f->limit = cfg->limit;
	f->window_ns = cfg->window_ns;
	f->clock = clock;
	atomic_init(&f->head, 0);
	atomic_init(&f->word, 0); /* epoch 0, count 0 */
	return 0;
}

uint64_t sluice__fixed_advance(sluice_fixed_t *f, uint64_t now)
{
	uint64_t e = now / f->window_ns;
	uint64_t h = atomic_load_explicit(&f->head, memory_order_relaxed);
	/* Move head forward to e unless someone already moved it further.
	 * Relaxed: head carries no data besides itself; the count word is
	 * validated against it on every use. */
	while (h < e &&
	       !atomic_compare_exchange_weak_explicit(&f->head, &h, e, memory_order_relaxed,
	                                              memory_order_relaxed))
		;
	return h < e ? e : h;
}

int sluice__fixed_bad_n(const sluice_fixed_t *f, uint64_t n, uint64_t now, sluice_decision_t *d)
{
	if (n == 0)
		return -SLUICE_EINVAL;
	sluice__decision_never(d, f->limit, now);
	return -SLUICE_ETOOBIG;
}

int sluice_fixed_refund_at(sluice_fixed_t *f, uint64_t n, const sluice_decision_t *admitted)
{
	if (!f || !admitted || !admitted->allowed || n == 0)
		return -SLUICE_EINVAL; /* nothing was taken by a refusal */
	uint64_t e = admitted->now_ns / f->window_ns;
	uint64_t w = atomic_load_explicit(&f->word, memory_order_relaxed);
	for (;;) {
		if ((w >> 32) != (e & 0xffffffffu))
			return 0; /* that window is over: its permits count no more */
		if ((w & 0xffffffffu) < n)
			return -SLUICE_EINVAL; /* more than was ever taken */
		/* Relaxed, like acquire: the count word is self-contained. */
		if (atomic_compare_exchange_weak_explicit(&f->word, &w, w - n, memory_order_relaxed,
		                                          memory_order_relaxed))
			return 0;
	}
}
