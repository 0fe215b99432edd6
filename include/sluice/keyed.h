/* SPDX-License-Identifier: MIT */
/*
 * sluice/keyed.h - a table of per-key limiters (per IP, per user, per route)
 * in one fixed block of memory, lock-free, with no pointers inside, so
 * several processes can share it through a MAP_SHARED mapping.
 *
 * One algorithm per table, one parameter set in force at a time (the rate,
 * burst or limit can change while the table is in use: LIVE PARAMETERS):
 *
 *   SLUICE_ALGO_GCRA      GCRA token bucket, rate + burst (sluice/gcra.h)
 *   SLUICE_ALGO_LEAKY     leaky bucket meter, rate + depth D (sluice/leaky.h:
 *                          GCRA with burst D + 1, nginx limit_req nodelay)
 *   SLUICE_ALGO_FIXED     fixed window, L per aligned window W (sluice/fixed.h)
 *   SLUICE_ALGO_WINDOW    sliding window ring, EXACT mode, L per W in N
 *                          buckets (sluice/window.h)
 *   SLUICE_ALGO_INFLIGHT  concurrency limit K per key (sluice/inflight.h),
 *                          with sluice_keyed_release()
 *
 * The per-key state is the state of those modules, laid out inside the
 * table's slots: their structures hold pointers (the clock, the window's
 * malloc'ed ring) and parameters, so they cannot be embedded.  lib/keyed_*.c keep
 * the same state words and applies the same arithmetic: the GCRA TAT word
 * (the parameters, T and tau, are validated and derived by sluice_gcra_init()
 * and sluice_leaky_init() themselves, and decisions are filled by gcra.h's
 * helper), the fixed window's window-and-count word (here with the whole
 * window number, not a tag), the in-flight count word, and the window ring's head and epoch-tagged bucket words (the ring
 * protocol of lib/window.c without its `cur` cache: each decision sums the
 * N - 1 closed buckets, which live in the key's own slot).  The guarantees
 * below are those modules' guarantees, per key.
 *
 * GUARANTEE (any number of threads and processes, any timing), per key,
 * while the key keeps its state (see EVICTION for what ends it), for the
 * parameters in force (across changes: LIVE PARAMETERS):
 *   GCRA:     admissions at times in any [x, x + t] total at most b + t/T;
 *   LEAKY:    at most D + 1 + t/T;
 *   FIXED:    at most L in every aligned window [k*W, (k+1)*W), for any
 *             sequence of readings (the state names its window in full);
 *   WINDOW:   at most L in every run of N consecutive buckets of W/N;
 *   INFLIGHT: held (acquired minus released) never exceeds K, never below 0.
 * Each check-and-count is one CAS on the key's state word (WINDOW: on the
 * current bucket's word; INFLIGHT: on the state word and the slot's 64-bit
 * owner counter together), so the bound is exact under concurrency, across
 * processes too.  A key's state is found by its bytes: two keys never share
 * a state (up to the 128-bit digest of a hashed long key, see KEYS), and one
 * key never has two live states (a creation race is resolved before either
 * copy is used, see lib/keyed_slot.c).
 *
 * LOSSLESS RECLAIM.  A slot whose state is equivalent to a fresh one (GCRA,
 * LEAKY: TAT before now, the bucket is full; FIXED: its window is over;
 * WINDOW: its newest bucket is N or more buckets old, every bucket is out of
 * range; INFLIGHT: nothing held) may be given to a new key.  That loses
 * nothing: when the old key comes back it gets a state no more permissive
 * than the one it left, at any time, because every new key starts at the
 * group's reclaim floor (the latest time a slot in its probe group was
 * reclaimed or evicted): a decision with a reading older than the floor
 * finds that new state exactly as full as at the floor (GCRA: less room;
 * windows: the reading counts in the floor's window).  So the GUARANTEE
 * above holds across reclaims.  A key that keeps sending is never reclaimed
 * while it matters: a GCRA key whose requests are at most T apart always has
 * TAT >= now; a window key's state is fresh-equivalent only when every
 * admission it holds is out of range.
 *
 * FULL GROUPS AND THE POLICY.  A key lives in one probe group of
 * SLUICE_KEYED_GROUP (8) slots chosen by a keyed hash (see HASHING); lookups
 * probe at most those 8 slots (8 cache lines for 64-byte slots), never more.
 * A new key takes a never-used or abandoned slot of its group, else a
 * fresh-equivalent one (lossless), else the table's policy decides:
 *   SLUICE_KEYED_REJECT  the request fails with SLUICE_EKEYFULL (counted in
 *                        rejections); the decision says refused.  Existing
 *                        keys are never touched.
 *   SLUICE_KEYED_ALLOW   the request passes untracked: return 1, counted in
 *                        untracked, and d->limit = 0 marks it (no limit was
 *                        applied).  Existing keys are never touched.  Not for
 *                        INFLIGHT (nothing could be released): SLUICE_EPOLICY.
 *   SLUICE_KEYED_EVICT   the live key whose state holds the least (its loss)
 *                        gives up its slot (counted in evictions): GCRA,
 *                        LEAKY: the smallest debt TAT - now; FIXED: the
 *                        fewest admissions in its window; WINDOW: the fewest
 *                        admissions in range.  Among keys of equal loss,
 *                        CLOCK's second chance: a key used since it was last
 *                        spared (its reference bit, set by lookups that find
 *                        it) is spared while one of equal loss was not used;
 *                        when all were, their bits are cleared and the first
 *                        in probe order goes.  This RESETS the evicted key: it
 *                        comes back with a fresh state, so over an interval
 *                        in which it is evicted e times its admissions can
 *                        exceed its bound by the sum of its losses (each at
 *                        most b, D + 1 or L).  The new key starts fresh as
 *                        well (at the group's floor), except WINDOW: there
 *                        it inherits the evicted key's admissions still in
 *                        range (at most its loss; fewer admissions, never
 *                        more: nothing is ever zeroed, so no late write can
 *                        give permits back).  Not for INFLIGHT (it would
 *                        forget held slots): SLUICE_EPOLICY.
 * What each policy guarantees to an abusive key A that keeps sending while an
 * attacker streams random keys:
 *   REJECT, ALLOW: A is never touched; its GUARANTEE holds exactly.
 *   EVICT: A is evicted only when no other live key of its group holds less
 *     than A, nor as much without having been used since it was spared.
 *     GCRA/LEAKY: A refused within the last T owes more than tau - 2T, so A
 *     survives while any key of its group owes at most tau - 2T, e.g. any
 *     flood key admitted fewer than b - 1 times in the last tau (b >= 3).
 *     FIXED/WINDOW: A's count in range dips each time its old admissions
 *     leave the window (to 1 right after a window boundary when it sends in
 *     bursts); at such an instant a flood key with the same count ties, and
 *     the reference bit A's last lookup set spares A, unless every tied key
 *     was used since its last second chance (an attacker that sends each
 *     flood key twice per window can then reset A, which gains at most its
 *     count at that instant).  Random keys cannot be aimed at A's group
 *     (HASHING).  tests/core/test_keyed.c floods 20 new keys per ms through a
 *     64-slot table while A sends at 100x its rate: A is never evicted.
 *
 * HASHING.  A keyed hash with a secret 128-bit seed per table (getrandom()
 * at init, or config.seed with SLUICE_KEYED_SEEDED) picks the group, the
 * start of the probe order in it and a 24-bit fingerprint.  Which hash
 * is chosen by init and recorded in the table's header, so every process
 * that attaches uses the same one:
 *   - keys of up to 16 bytes (and the digests of hashed long keys), where
 *     the CPU that formats the table has AES instructions (AES-NI on
 *     x86-64, AESE/AESMC on arm64: the same function bit for bit): the AES hash of
 *     lib/keyhash_internal.h, four AES rounds under round keys derived
 *     from the seed, after a whitening key that depends on the seed and
 *     the key's length (the shape of Go's runtime aeshash and Rust's
 *     ahash, with a round more than Go's three for short keys);
 *   - otherwise, and always with SLUICE_KEYED_SIPHASH: SipHash-1-3 under
 *     the seed (the rounds Rust's and Python's hash tables use), which is
 *     also the hash of keys longer than 16 bytes in every table.
 * A table with the AES hash cannot be attached by a process whose CPU
 * lacks AES instructions (SLUICE_ELAYOUT; tests/core/test_keyed_faults.c); a SipHash
 * table attaches anywhere.  What an attacker who does not know the seed
 * can and cannot do: SipHash-1-3 is a pseudorandom function, so a client
 * that learns which of its keys share a group (from refusals, evictions
 * or timing) learns nothing about where any other key lands, and adaptive
 * probing does not help.  The AES hash claims less, as Go and ahash claim
 * for theirs (resistance to flooding while the seed is secret, not a
 * proven PRF): two rounds already make every output bit depend on every
 * key bit, and over four rounds every differential characteristic has at
 * least 25 active S-boxes (AES's wide-trail bound), so no difference
 * between two keys that a client chooses is known to make them collide
 * with better odds than chance; the attacks known on four-round AES need
 * the full 128-bit outputs of chosen inputs, and a client sees at most a
 * few low bits of the hash (which keys share a group).  So, without the
 * seed, no way is known to make keys collide with either hash, and
 * flooding degrades into the random case.  Anyone with the seed (a
 * process that can read the table's memory) can aim keys at one group,
 * with either hash.  Past the probe bound nothing is searched: a full group is a full table for that
 * key (the policy above).  With one group per key, groups fill unevenly: at
 * 50% occupancy of random keys about 5% of groups of 8 are full, at 25%
 * about 0.1% (Poisson tails); size the table for about four times the keys
 * that are live at once, and rely on lossless reclaim for keys that went
 * quiet.
 *
 * KEYS.  Byte strings of 1..key_max bytes (default 32: an IPv6 address and a
 * route id; at most SLUICE_KEYED_KEY_MAX).  A longer key fails with
 * SLUICE_EKEYLEN, unless the table was created with
 * SLUICE_KEYED_HASH_LONG_KEYS: then it is replaced by a 128-bit SipHash
 * digest under two further seeds, stored with its own length code so it
 * never equals a short key; two long keys share a state only if their
 * digests collide (2^-128 for a pair; the seed keeps it out of an attacker's
 * reach).  key_max must then be at least 16.
 *
 * SHARED MEMORY, CRASHES, STOPS.  The table is position-independent
 * (offsets, no pointers) and its clock is not in it: each process attaches
 * with its own clock, and all must use one timeline (the CLOCK_MONOTONIC
 * base of every sluice clock, or one caller timeline for the _at variants).
 * A process killed at any instruction leaves no slot that others must wait
 * for: every step of a claim is a CAS that leaves a state any other process
 * can complete (a claim whose key bytes are written is finished by whoever
 * meets it; a retired state is claimable at once) or take over (a claim
 * whose claimer stopped writing is stolen after SLUICE_KEYED_LEASE_MS of
 * real time, CLOCK_MONOTONIC_COARSE).  What a killed process loses: the
 * permits it admitted stay counted (they happened); INFLIGHT slots it held
 * are never released (as in sluice/inflight.h); a statistics increment may
 * be missing.
 * A process stopped (SIGSTOP, a debugger, a long preemption) at any
 * instruction for any time and then resumed:
 *   - in a decision: its CAS succeeds only on the exact state word it
 *     checked, of the exact owner it checked.  Every slot pairs its state
 *     word with a 64-bit owner counter (bumped by every initialisation of
 *     the slot for a new owner, never wrapping), and a decision reads the
 *     owner, then the state, then checks the tag and the key bytes, and
 *     CASes state and owner together (one double-width CAS): it never
 *     judges by, charges, takes from or gives back to a later owner of
 *     the slot, however long the stop.  GCRA, LEAKY, FIXED: the state word
 *     names the whole state (FIXED: the window number in full), so the
 *     admission is exact.  WINDOW: head moves by the same pair CAS; a
 *     bucket word tags its epoch with 32 bits and is CASed alone, so after
 *     2^32 buckets, or after the slot changed owner, the CAS can meet a
 *     word that looks the same; the admission then re-reads head and the
 *     owner and is refused (the permits stay counted in that bucket: fewer
 *     admissions, never more).  INFLIGHT: an acquire and a release are
 *     exact in the same way.
 *   - in a claim: the claim is stolen after the lease, and the claimer, once
 *     resumed, writes nothing into a slot claimed since: every claim bumps
 *     the slot's 64-bit claim counter (never wrapping) with the same
 *     double-width CAS that takes the tag, and every key word is paired
 *     with the counter of the claim that wrote it and written only by a
 *     double-width CAS expecting the pair it read, so a claimer's write
 *     after any later claim fails, even when the word repeats, bit for
 *     bit, what it read (tests/core/test_keyed_faults.c: 65,535 claims later,
 *     same 8 key bytes).  Readers match a key against the words of the
 *     slot's current claim only (each word's counter is the slot's, loaded
 *     after the words), never against a 16-bit generation, so no number of
 *     claims makes an old claim's words pass for the current key's.  Its lease time is 14
 *     bits of 2^24 ns: a claim stopped for a multiple of 275 s looks fresh
 *     again for up to the lease, which only delays its steal.  A claimer stopped between reading a retired state and the
 *     CAS that initialises it initialises nothing if any other
 *     initialisation came in between (the CAS expects the owner counter it
 *     read), even one after which the slot was evicted back to exactly the
 *     same retired value.
 *   Nothing it does makes another call wait: no call of another process
 *   ever waits for it.
 * A process that writes the table's memory at will (a hostile or broken
 * attacher) can make keys unreadable, reset or fill their states, and make
 * calls refuse, fail with SLUICE_EKEYFULL, or give up with SLUICE_EBUSY;
 * it cannot make a call of this process crash, read or write outside the
 * table, divide by zero, shift out of range, or run for more than
 * 4096 retries (every value read from a slot, a floor, the header or the
 * live parameters is either validated or harmless at any value:
 * tests/core/test_keyed_faults.c forges slots and live blocks at random); a
 * rewritten live block is refused whole unless it is a set a setter
 * writes (LIVE PARAMETERS).  It can, of course, admit anything it likes in
 * its own process.
 *
 * CLOCK JUMPS.  GCRA, LEAKY: the reading is used as it is (an older reading
 * finds less room, d->now_ns is the reading), except that a reading before
 * the reading of the change in force is read as that change's (time never
 * runs back past a change; LIVE PARAMETERS).  FIXED, WINDOW: a reading
 * before the key's newest window or bucket counts in it (d->now_ns is then
 * that window's or bucket's start).  INFLIGHT: time is only copied to
 * d->now_ns.  These hold for any sequence of readings, forward, back or
 * jumping by any amount (FIXED stores the whole window number, WINDOW the
 * whole head epoch).  Readings must be below 2^62 ns (146 years of CLOCK_MONOTONIC):
 * the state words spend their top bits on the slot protocol; a time at or
 * above it is SLUICE_ETIME.
 *
 * WORST CASE (what it does not prevent):
 *   - Under EVICT, an attacker who keeps every key of a group at its limit
 *     can reset the least-loaded of them (see above).  Under REJECT, an
 *     attacker who fills a group with keys at their limits locks new keys of
 *     that group out for as long as those keys stay non-fresh; under ALLOW
 *     those new keys pass untracked.  Size the table and choose accordingly.
 *   - Lock-free, not wait-free: a decision retries while other decisions on
 *     the same key succeed, and a creation retries while slots of its group
 *     change under it.  Every call counts its retries (failed CASes, lost
 *     claims, owner changes met) and gives up after 4096 with SLUICE_EBUSY,
 *     having taken nothing: honest contention does not come near it (each
 *     retry needs another call on the same words to succeed meanwhile); a
 *     writer that never stops changing a word does.
 *   - Generations and tags (see SHARED MEMORY, CRASHES, STOPS for what a
 *     stopped process can do with each): claims carry a 16-bit generation,
 *     compared only for equality, and a 64-bit claim counter, paired with
 *     every key word; WINDOW buckets a 32-bit epoch tag, checked
 *     against head and the owner after each admission; INFLIGHT states a
 *     generation of 62 - bit_width(K) bits.  Every state word is paired
 *     with a 64-bit owner counter that every initialisation, decision,
 *     release and head advance compares.  FIXED's state holds the window
 *     number in full.
 *
 * LIMITS: capacity 8..2^32 slots, rounded up to a power of two
 * (SLUICE_ECAPACITY); key_max 1..SLUICE_KEYED_KEY_MAX (SLUICE_EKEYLEN);
 * GCRA, LEAKY: as gcra.h and leaky.h (SLUICE_ERATE, SLUICE_EBURST), and
 * b * T (D + 1 intervals for LEAKY) at most SLUICE_KEYED_TAU_MAX, 2^61 - 1 ns
 * (SLUICE_EBURST: the TAT lives below 2^62 ns, so every reading below
 * 2^61 ns can pass; a bucket near gcra.h's own 2^62 - 1 would leave none);
 * FIXED: L in 1..2^24 - 1 and W >= 2^bit_width(L) ns, i.e. L at most
 * 2^floor(log2 W) - 1 (W = 1 ms allows L up to 2^19 - 1, W = 1 s up to
 * 2^24 - 1; sluice_keyed_set_limit() up to 2^bit_width(L at init) - 1)
 * (SLUICE_ELIMIT: the count takes bit_width(L) bits of the state, the
 * window number the other 62 - bit_width(L), which must hold every
 * window below 2^62 ns), W at least the resolution of the clock a process
 * attaches with (SLUICE_ERESOLUTION at attach); WINDOW: L in 1..2^30 - 1, N in
 * 1..SLUICE_KEYED_BUCKETS_MAX (16) (SLUICE_EBUCKETS), W a multiple of N
 * (SLUICE_EWINDOW), always EXACT; INFLIGHT: K in 1..2^32 - 1 (set_limit:
 * up to 2^bit_width(K at init) - 1).
 * n in 1..(b, D + 1, L, K) of the parameters in force.
 *
 * LIVE PARAMETERS.  The rate and burst (GCRA, LEAKY: sluice_keyed_set_rate,
 * sluice_keyed_set_burst, the burst being LEAKY's depth D) and the limit
 * (FIXED, WINDOW, INFLIGHT: sluice_keyed_set_limit) live in the table, not
 * in the handle: attach reads the ones in force and takes none (a process
 * cannot bring its own: all processes of a table decide with the same
 * parameters, and a change by one, e.g. an nginx reload or the rules
 * engine, reaches every other at its next decision, with every key's state
 * kept).  The algorithm, key_max, capacity, the window length W, the
 * bucket count N and the bits of FIXED's and INFLIGHT's count fix the slot
 * layout and never change (set_rate and set_burst on FIXED, WINDOW and
 * INFLIGHT, set_limit on GCRA and LEAKY: SLUICE_ENOTSUP; a FIXED or INFLIGHT
 * limit wider than bit_width of the one init was given: SLUICE_ELIMIT).
 * What a change means for what each key has already counted (never more
 * permits than before, no fresh burst: the rule of gcra.h's SET_RATE /
 * SET_BURST), and for readings on either side of it.  A setter's reading
 * (@now of set_*_at, the clock read on entry by the plain ones) may be
 * older than readings decisions already used: it reads the clock, then
 * publishes while deciders go on.  So:
 *   GCRA, LEAKY: the change is stamped tc = the later of the setter's
 *     reading (the plain setters read their clock again once they hold
 *     the setters' lock) and the table's newest reading less at most
 *     65.5 us (every decision notes its reading in the table when it
 *     passes the one noted, about once per 65.5 us); a reading more than
 *     2^30 ns (1.07 s) past the setter's is a forward clock jump and moves
 *     no stamp.  For each key the change takes effect at
 *     s = the later of tc and the newest reading decided on that key
 *     before the publication (never earlier: nothing is credited for time
 *     a decision with the old parameters already counted).  At s the key
 *     holds the fewer of (a) the permits it held just before (negative
 *     for a key that owed more than b0 at tc: that debt is kept, in the
 *     new T, rounded against admission), capped at b1, and (b) what
 *     (T1, b1) give for its unchanged TAT; it then refills at the new
 *     rate.  So lowering the rate or raising the burst keeps the permits
 *     held (a full bucket of b0 raised to b1 holds b0 and fills up at the
 *     new rate, as do keys created, or reclaimed, within (b1 - b0) T1 of
 *     the later of the change and their group's reclaim floor: a raise
 *     never credits more than b1 less what the key holds at s, and that
 *     only as the new rate refills it); raising the rate or lowering the
 *     burst keeps the TAT (an emptied key gets the faster rate once its
 *     old TAT passes).  A decision of the new parameters whose reading is
 *     older than s counts as at s: its TAT is written as at s and its test
 *     is stricter (less room).  Across any sequence of changes and any
 *     interleaving of readings, a key's admissions at (so counted) times
 *     in any [x, y] total at most b(x) + the sum over the parameter sets
 *     in force during [x, y] of their time in it divided by their T, with
 *     b(x) the burst in force at x (the larger of two at a change's s);
 *     so at most max(b) + (y - x) / min(T) over the sets in force.  Two
 *     changes must be more than max(tau before, tau after) apart (tau =
 *     b T), counted from the newest reading the table had seen when the
 *     first was published (at most 65.5 us past a real one, and at most
 *     1.07 s past the first's stamp), plus what a key may still owe past
 *     tau then (keyed_live.c, "Two eras"): an earlier second change is
 *     refused with SLUICE_EBUSY, having changed nothing (a key's state
 *     word tells two parameter sets apart).  The one case this spacing
 *     does not cover is a key decided at a jumped reading (above): the
 *     second change after may read its state as its own, which admits
 *     nothing for it until the clock comes within that change's tau of
 *     the jumped reading.
 *   FIXED, WINDOW: counts are kept, and the stamp is the setter's reading
 *     tc; the window (the range of N buckets) that holds tc, and every
 *     earlier one, has the smaller of the old and new L (and of the caps
 *     of a change whose transition it also holds); later windows have the
 *     new L for the decisions that see the change.  A window that began
 *     after tc but before the publication may already hold admissions
 *     decided with the old L: every window holds at most the larger of
 *     what was admitted in it before the publication (at most the old L)
 *     and the limit the change gives it; so at most the larger L in force
 *     during it.  A reading before the key's newest window counts in that
 *     window (CLOCK JUMPS), under that window's limit.
 *   INFLIGHT: the count held is kept and the new K applies to the next
 *     acquire (a lower K refuses until releases bring the count under it).
 * Each decision uses one parameter set in full, never a mix of two: the
 * parameters are two blocks under an era word that decisions read before
 * and after the key's state, and a setter writes only the block not in
 * force, then publishes (lib/keyed_live.c says what pairs with what).
 * Decisions never wait for a change.  Changes serialise on a lock in the
 * table; one whose holder is stopped or dead for SLUICE_KEYED_LEASE_MS is
 * overtaken, and the overtaken setter, resumed, can write and publish
 * nothing.  The parameters are read from shared memory, which another
 * process can rewrite: every decision checks the block it read as a setter
 * writes it (GCRA, LEAKY: T >= 1, tau = b T without overflow, tau at most
 * SLUICE_KEYED_TAU_MAX; FIXED, WINDOW: the largest n is L and the cap of a
 * transition at most L) and refuses a block that fails whole
 * (SLUICE_EBUSY, nothing taken): no clamp of an inconsistent set is one
 * init accepts.  Values that pass are clamped to the count's range where
 * used (FIXED, INFLIGHT: the count's bits; WINDOW: SLUICE_WINDOW_LIMIT_MAX);
 * the rest are used only in ways that are harmless at any value (masked
 * shifts, guarded divisors, saturating sums), as the slots are.  So a
 * rewritten block admits at most what a set init accepts allows.
 *
 * MEMORY (sluice_keyed_region_bytes()): 256 bytes of header, 576 of live
 * parameters (a line of control words and two blocks of 15 (value, ticket)
 * pairs), 1 KiB of statistics
 * (16 cells of 64 bytes, picked by CPU), 8 bytes per group of 8 slots (the
 * reclaim floor), and per slot: 16 bytes (the tag and the claim counter),
 * 16 bytes per 8 key bytes (the key word and the counter of the claim that
 * wrote it), 16 bytes of state and owner counter, and (WINDOW) 8 bytes per
 * bucket (N rounded up to a power of two), rounded up to 64 bytes: for
 * GCRA, LEAKY, FIXED and INFLIGHT one 64-byte line with key_max up to 16
 * (an IPv6 address; an IPv4 address and a route id), 128 bytes up to 48
 * (the default 32 included); for WINDOW with the default keys 192 bytes
 * for N <= 8, 256 for N <= 16.  Format 7 had 16 bytes per 6 key bytes
 * (128-byte slots from 13-byte keys), format 6 8 bytes per 6.  Set key_max
 * to the longest key the table will see: it fixes the slot's size.  A
 * 100,000-key GCRA table (capacity 131,072) takes 16.1 MiB with the
 * default key_max, 8.1 MiB with key_max 16.  No allocation after init, ever
 * (sluice_keyed_init() allocates the region once).
 *
 * COST: a decision on an existing key hashes the key (a key of up to 16
 * bytes is loaded once, as the two words both the hash and the compare
 * use; the AES hash is one call, SipHash-1-3 inline), prefetches its first probed slot, reads
 * that slot's line (usually the key's: one line a key with key_max <= 16)
 * and compares the key words, loads the era of the parameters (GCRA,
 * LEAKY: and the newest reading beside it, compared with the reading: a
 * write to that line about once per 65.5 us of the table's time), the
 * era's block (one or two lines that only changes write; its values
 * checked with a multiply and a few compares) and the owner counter,
 * the state and the era again, checks the tag and the slot's claim counter
 * again (not the key words: the claim they matched under),
 * does one double-width CAS on the state and owner (none on a refusal)
 * and a relaxed load and store on this CPU's statistics line (WINDOW: an admission's CAS is on its
 * bucket word, followed by loads of the owner and head).  A new key scans
 * its group and claims a slot with a few CASes.  Measured figures (ns,
 * instructions per decision) are in docs/performance.md.
 */
#ifndef SLUICE_KEYED_H
#define SLUICE_KEYED_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "common.h"
#include "decision.h"
#include "stripe.h"

#define SLUICE_KEYED_KEY_MAX 240u     /* longest key_max                   */
#define SLUICE_KEYED_KEY_DEFAULT 32u  /* key_max when the config says 0    */
#define SLUICE_KEYED_GROUP 8u         /* slots probed per key              */
#define SLUICE_KEYED_BUCKETS_MAX 16u  /* WINDOW: most buckets per key      */
#define SLUICE_KEYED_CAPACITY_MIN 8ULL
#define SLUICE_KEYED_CAPACITY_MAX (1ULL << 32)
#define SLUICE_KEYED_FIXED_LIMIT_MAX ((1ULL << 24) - 1)
#define SLUICE_KEYED_INFLIGHT_LIMIT_MAX 0xffffffffULL
#define SLUICE_KEYED_TAU_MAX ((1ULL << 61) - 1) /* GCRA, LEAKY: b * T, ns */
#define SLUICE_KEYED_TIME_MAX ((1ULL << 62) - 1) /* latest reading        */
#define SLUICE_KEYED_LEASE_MS 100u    /* a stalled claim may be stolen after */
#define SLUICE_KEYED_VERSION 10u /* 10: the live block keeps the newest reading and a lift */

typedef enum sluice_keyed_policy {
	SLUICE_KEYED_REJECT = 0,
	SLUICE_KEYED_ALLOW = 1,
	SLUICE_KEYED_EVICT = 2,
} sluice_keyed_policy_t;

/* config.flags */
#define SLUICE_KEYED_HASH_LONG_KEYS 1u /* digest keys longer than key_max   */
#define SLUICE_KEYED_SEEDED 2u         /* use config.seed, not getrandom()  */
#define SLUICE_KEYED_SIPHASH 4u        /* SipHash-1-3 even with AES (HASHING) */
#define SLUICE_KEYED_COUNT_LOOKUPS 8u  /* count lookups in the stats (a CPU
                                        * number read and a store per call) */

typedef struct sluice_keyed_config {
	sluice_algo_t algo;  /* SLUICE_ALGO_GCRA, _LEAKY, _FIXED, _WINDOW, _INFLIGHT */
	sluice_keyed_policy_t policy;
	uint32_t flags;      /* SLUICE_KEYED_HASH_LONG_KEYS | _SEEDED | _SIPHASH
	                      * | _COUNT_LOOKUPS */
	uint32_t key_max;    /* longest key in bytes; 0: 32                     */
	uint64_t capacity;   /* slots: 8..2^32, rounded up to a power of two    */
	uint64_t seed[2];    /* the hash's seed when flags has SLUICE_KEYED_SEEDED */
	/* GCRA: rate per period_ns, burst.  LEAKY: rate per period_ns, depth. */
	uint64_t rate, period_ns, burst, depth;
	/* FIXED: limit per window_ns.  WINDOW: limit per window_ns in buckets.
	 * INFLIGHT: limit.  Fields of other algorithms are ignored. */
	uint64_t limit, window_ns;
	uint32_t buckets;
} sluice_keyed_config_t;

/* private: the table header, at the start of the memory (256 bytes), and
 * the live parameters after it (see LIVE PARAMETERS). */
struct sluice__keyed_hdr;
struct sluice__keyed_live;

/*
 * The process-local handle: where this process mapped the table and which
 * clock it reads.  Filled by sluice_keyed_attach() with the parameters that
 * fix the layout (validated by attach, never read from the header again);
 * the parameters that can change are read from the table at each decision
 * (LIVE PARAMETERS).
 */
typedef struct sluice_keyed {
	/* read-only after attach */
	const sluice_clock_t *clock;
	unsigned char *slots;               /* first slot                   */
	_Atomic uint64_t *floors;           /* one reclaim floor per group  */
	struct sluice_stripe_cell *cells;   /* statistics (keyed_internal.h) */
	uint64_t group_mask;                /* groups - 1                   */
	uint64_t capacity;
	uint32_t slot_bytes, key_words, key_max, flags;
	sluice_algo_t algo;  /* SLUICE_ALGO_GCRA, _LEAKY, _FIXED, _WINDOW, _INFLIGHT */
	sluice_keyed_policy_t policy;
	uint32_t buckets, bucket_mask, cell_mask;
	uint32_t cbits;                     /* FIXED, INFLIGHT: count bits  */
	uint64_t k0, k1, d0, d1, d2, d3;    /* hash and digest keys         */
	uint64_t ak[12];                    /* the AES hash's round keys    */
	uint64_t window_ns, width_ns;       /* FIXED, WINDOW (fixed)        */
	struct sluice__keyed_live *live;    /* the parameters in force      */
	/* private: set by sluice_keyed_init() */
	void *owned;
} sluice_keyed_t;

typedef struct sluice_keyed_stats {
	uint64_t lookups;    /* acquire and release calls on valid input, in a
	                      * table made with SLUICE_KEYED_COUNT_LOOKUPS (0
	                      * otherwise); may undercount (never overcount)
	                      * when two calls count on one CPU's line at once:
	                      * it is a load and a store, not an atomic add */
	uint64_t creations;  /* keys given a slot                             */
	uint64_t reclaims;   /* fresh-equivalent slots retaken (lossless)     */
	uint64_t evictions;  /* live keys reset by the EVICT policy           */
	uint64_t rejections; /* new keys refused by the REJECT policy         */
	uint64_t untracked;  /* requests passed untracked by the ALLOW policy */
	uint64_t steals;     /* claims taken over from a stalled claimer      */
	uint64_t occupancy;  /* live keys now                                 */
	uint64_t capacity;   /* slots                                         */
} sluice_keyed_stats_t;

/* The parameters in force (sluice_keyed_params()). */
typedef struct sluice_keyed_params {
	uint64_t era;        /* changes published since init                  */
	uint64_t rate, period_ns, burst; /* GCRA; LEAKY: burst is the depth D  */
	uint64_t limit;      /* FIXED, WINDOW: L; INFLIGHT: K                 */
	uint64_t nmax;       /* the largest n a call may ask for now          */
} sluice_keyed_params_t;

/*
 * sluice_keyed_region_bytes - bytes of memory a table with @cfg needs.
 * Thread-safe, no allocation.
 * Return: the size, or 0 when @cfg is invalid (sluice_keyed_format() says why).
 */
SLUICE_API size_t sluice_keyed_region_bytes(const sluice_keyed_config_t *cfg);

/*
 * sluice_keyed_format - validate @cfg and format @size bytes at @mem (64-byte
 * aligned, at least sluice_keyed_region_bytes(cfg)) as an empty table.
 * Its own verb (common.h): `_init` initialises a caller's struct,
 * `_new`/`_free` allocate, and this writes a table into memory that any
 * number of processes then attach.
 *
 * Reads getrandom() for the seed unless cfg->flags has SLUICE_KEYED_SEEDED.
 * No other process may use @mem during init; the header's magic is written
 * last with a release store, so a process that attaches afterwards (and sees
 * it) sees the whole table.  No allocation.
 * Return: 0; SLUICE_EINVAL (NULL), SLUICE_ESIZE (too small, misaligned),
 * SLUICE_EALGO (algo), SLUICE_EPOLICY, SLUICE_ECAPACITY, SLUICE_EKEYLEN
 * (key_max), the algorithm's parameter codes (see LIMITS), SLUICE_ECLOCK
 * (getrandom failed).  On error @mem is untouched.
 */
SLUICE_NODISCARD SLUICE_API int sluice_keyed_format(void *mem, size_t size, const sluice_keyed_config_t *cfg);

/*
 * sluice_keyed_config_check - what sluice_keyed_format() would return for
 * @cfg, and then sluice_keyed_attach() with @clock (NULL: init's checks
 * only), for memory large enough: the same validator, with no memory and
 * no table.  The rules file and the nginx module validate through this,
 * never through a throw-away table.  Thread-safe, no allocation.
 * Return: 0, or init's (then attach's) error code for @cfg.
 */
SLUICE_NODISCARD SLUICE_API int sluice_keyed_config_check(const sluice_keyed_config_t *cfg,
                                                          const sluice_clock_t *clock);

/*
 * sluice_keyed_attach - make @k a handle on the table at @mem (@size bytes,
 * as mapped by this process), deciding with @clock (NULL: the cached clock).
 *
 * Takes no parameters: the ones in force are read from the table at each
 * decision (LIVE PARAMETERS).  Trusts nothing in the header.  Checks alignment and size (SLUICE_ESIZE);
 * the magic, the version, the header's size and a checksum over the header
 * (SLUICE_ELAYOUT) - the checksum's key is fixed and public, so it only
 * catches accidents (another version, a stray write), never a process that
 * rewrites the header on purpose; then runs the stored configuration
 * through the same validator as sluice_keyed_format() (the algorithm's own
 * init and the keyed ranges: a configuration init refuses is refused with
 * init's code, e.g. SLUICE_EWINDOW for W = 0, SLUICE_ELIMIT for a FIXED
 * L of 2^26), recomputes every derived value (GCRA's T, tau, reciprocal and
 * shift, the bucket width, the largest n, the digest keys) and the layout,
 * and refuses (SLUICE_ELAYOUT) a header whose stored values differ or whose
 * layout does not fit in @size, or whose hash this CPU cannot compute
 * (the AES hash without AES instructions: HASHING).  The handle keeps the recomputed values, so
 * a later rewrite of the header changes nothing for it.  What attach cannot
 * check: that the seed and the slots are the ones init wrote (see SHARED
 * MEMORY for what forged slots can do).  Memory that is not a table gives an
 * error, never a crash (it reads only inside @size).  FIXED, WINDOW:
 * SLUICE_ERESOLUTION when the clock is coarser than the window or bucket.
 * Any number of handles, in any processes, may attach to one table.  No
 * allocation.
 * Return: 0 or a negative code; on error @k is untouched.
 */
SLUICE_NODISCARD SLUICE_API int sluice_keyed_attach(void *mem, size_t size, const sluice_clock_t *clock,
                                   sluice_keyed_t *k);

/*
 * sluice_keyed_init - initialise the caller's handle @k on a table for @cfg
 * that it allocates in this process (format and attach, with @clock).  For
 * a table used by one process; for sharing, format and attach memory you
 * mapped.  Allocates once.
 * Return: as sluice_keyed_format() and attach, or SLUICE_ENOMEM.
 */
SLUICE_NODISCARD SLUICE_API int sluice_keyed_init(sluice_keyed_t *k, const sluice_keyed_config_t *cfg,
                                const sluice_clock_t *clock);
/* sluice_keyed_destroy - free what sluice_keyed_init() allocated (nothing for an
 * attached handle: the mapping is the caller's).  NULL is fine.  No call on @k may be running. */
SLUICE_API void sluice_keyed_destroy(sluice_keyed_t *k);
/* sluice_keyed_size - sizeof(sluice_keyed_t), for FFI callers. */
SLUICE_API size_t sluice_keyed_size(void);

/*
 * sluice_keyed_acquire_at - take @n permits for the key @key (@keylen
 * bytes) at time @now, all or nothing; create the key's state if it has none.
 * @d: NULL, or filled with the decision (as the algorithm's module fills it;
 * under ALLOW, an untracked pass has d->limit = 0).
 *
 * Lock-free, no allocation, no system call (a new key may read
 * CLOCK_MONOTONIC_COARSE for its claim's lease).  Safe from any number of
 * threads and processes attached to the table.  Ordering: as the algorithm's
 * module (INFLIGHT: a successful acquire is a full barrier, so it acquires
 * what the releases of the slots it takes published); a key's creation is
 * published with
 * a release that the lookups of other threads acquire.
 * Return: 1 admitted, 0 refused; SLUICE_EINVAL (NULL, n = 0),
 * SLUICE_ETOOBIG (n above the largest: never passes; retry SLUICE_NEVER),
 * SLUICE_EKEYLEN (empty or too long), SLUICE_ETIME (now >= 2^62),
 * SLUICE_EKEYFULL (REJECT: no room for a new key; d says refused, with
 * retry_after_ns the time until a slot of its group becomes fresh-equivalent
 * when that is known, else 0), SLUICE_EBUSY (4096 retries without an
 * answer, see WORST CASE: nothing taken; d says refused, retry_after_ns 0).
 */
SLUICE_NODISCARD SLUICE_API int sluice_keyed_acquire_at(sluice_keyed_t *k, const void *key, size_t keylen,
                                       uint64_t n, uint64_t now, sluice_decision_t *d);

/* sluice_keyed_acquire - as _at, reading the handle's clock. */
SLUICE_NODISCARD SLUICE_API int sluice_keyed_acquire(sluice_keyed_t *k, const void *key, size_t keylen,
                                       uint64_t n, sluice_decision_t *d);

/*
 * Batches: several keyed decisions of one request (a gateway's limits per
 * route, per user, per IP), each on its own table or on the same one.
 */
#define SLUICE_KEYED_BATCH_MAX 8u /* requests per sluice_keyed_acquire_many_at */
#define SLUICE_KEYED_ALL 1u       /* all or nothing: one refusal refuses all  */
#define SLUICE_KEYED_STOP 2u      /* in order, up to the first not admitted   */

typedef struct sluice_keyed_request {
	sluice_keyed_t *table;  /* the table that decides this key             */
	const void *key;
	size_t keylen;
	uint64_t n;             /* permits, >= 1                               */
	sluice_decision_t *d;   /* NULL, or filled as sluice_keyed_acquire_at  */
	int result;             /* out: as sluice_keyed_acquire_at returns     */
} sluice_keyed_request_t;

/*
 * sluice_keyed_acquire_many_at - decide @count requests (1 to
 * SLUICE_KEYED_BATCH_MAX) at time @now: every key is hashed and its first
 * slot and its table's parameter lines prefetched before any is decided,
 * so the memory latency of one lookup overlaps the others' instead of
 * adding to them.  Then each request is decided in order by the same code
 * as sluice_keyed_acquire_at(), with the same per-key guarantees (WORST
 * CASE, CLOCK JUMPS, SHARED MEMORY, CRASHES, STOPS), and req[i].result is
 * what that call would have returned.
 *
 * @flags 0: the requests are independent; each is decided, whatever the
 * others' answers.  Return: the number of requests admitted (0..@count).
 *
 * @flags SLUICE_KEYED_ALL: all or nothing, as sluice/composite.h: the
 * requests are decided in order until one is not admitted (refused, or an
 * error); the admissions before it are given back (sluice_keyed_refund())
 * and the requests after it are not asked (their result is set to 0, their
 * decision left as it was).  A request that fails the batch's own checks
 * (NULL table or key, n = 0, a key the table cannot hold) is found before
 * any is decided: then nothing is asked or taken, that request's result is
 * its code, the others' 0, and the call returns the code.  An admission the refund
 * cannot give back exactly stays counted (WINDOW always; a key decided on
 * since: sluice_keyed_refund()): fewer admissions later, never more; and
 * while permits are being given back a concurrent decision on the same key
 * can see them taken and refuse (transient under-admission, as the
 * composite's).  Each request's result stays its own answer (1 for an
 * admission that was then given back).  Return: 1 when every request was
 * admitted (and nothing given back); otherwise the result of the first
 * request not admitted (0, or its SLUICE_E* code).
 *
 * @flags SLUICE_KEYED_STOP: in order, as a caller that asks its limits one
 * after the other and stops at the first refusal: the requests are decided
 * in order until one is not admitted (refused, an error, or one that fails
 * the batch's own checks: its code, found when its turn comes, so the
 * requests before it are asked); nothing is given back (the admissions
 * before it stay taken, for the caller to keep or give back: a gateway
 * whose limits may pass on an error asks the rest again) and the requests
 * after it are not asked (result 0, decision left as it was).  Return: as
 * SLUICE_KEYED_ALL's, 1 when every request was admitted, otherwise the
 * result of the first request not admitted; the first result that is not
 * 1 names it.
 *
 * Either way: SLUICE_EINVAL for the batch itself (req NULL, @count 0 or
 * above SLUICE_KEYED_BATCH_MAX, an unknown flag, or both SLUICE_KEYED_ALL
 * and SLUICE_KEYED_STOP; nothing asked, no result written), SLUICE_ETIME
 * (@now past SLUICE_KEYED_TIME_MAX: nothing asked, no result written).
 * Lock-free, no allocation, no system call (as sluice_keyed_acquire_at);
 * stack: SLUICE_KEYED_BATCH_MAX keys as the tables store them and as many
 * decisions, under 3 KiB.
 */
SLUICE_NODISCARD SLUICE_API int sluice_keyed_acquire_many_at(sluice_keyed_request_t *req,
                                                             size_t count, uint64_t now,
                                                             unsigned flags);

/* sluice_keyed_acquire_many - as _at, reading the clock of req[0].table. */
SLUICE_NODISCARD SLUICE_API int sluice_keyed_acquire_many(sluice_keyed_request_t *req,
                                                          size_t count, unsigned flags);

/*
 * sluice_keyed_prefetch - start loading the cache line where @key's state
 * would be found, so that a later decision on @key finds it in cache.
 * For callers that know the next key before deciding the current one (a
 * gateway that parses request i + 1's key before deciding request i, a
 * batch): prefetch key i + 1, decide key i; the memory latency of the
 * lookup then overlaps the work between the two calls.
 *
 * Computes the key's hash (the decision computes it again) and issues one
 * prefetch hint for the first slot of its probe order; nothing else.  A
 * hint only: it reads no slot, writes nothing, cannot fault, changes no
 * result and no statistic, and does nothing for invalid input (NULL, an
 * empty or too long key).  It helps only while the line stays cached until
 * the decision (the next few hundred nanoseconds, typically), and only for
 * the slot a key's lookup probes first (where a key lives unless its group
 * was crowded when it was created).  Thread-safe, any process; lock-free,
 * no allocation, no system call.
 */
SLUICE_API void sluice_keyed_prefetch(const sluice_keyed_t *k, const void *key, size_t keylen);

/*
 * sluice_keyed_release - INFLIGHT: give back @n slots the key took.
 * Never creates a key.  Lock-free, no allocation.  A successful release is a
 * full barrier on the key's count (the next acquire that reads it acquires
 * this holder's writes).  It gives @n back to the key's own state only, after
 * a stop of any length (SHARED MEMORY, CRASHES, STOPS).
 * Return: 0; SLUICE_EINVAL (NULL, n = 0), SLUICE_EKEYLEN, SLUICE_ENOTSUP
 * (not an INFLIGHT table), SLUICE_ERELEASE (the key holds fewer than @n, or
 * has no state: nothing changed), SLUICE_EBUSY (4096 retries: nothing
 * changed).
 */
SLUICE_API int sluice_keyed_release(sluice_keyed_t *k, const void *key, size_t keylen,
                                    uint64_t n);

/*
 * sluice_keyed_refund - give back @n permits of the admission @admitted
 * (a decision this table returned 1 for, for @key), as the composite does
 * when a later part refuses.  Exact when the key's state is still exactly
 * what that admission left: GCRA, LEAKY: the TAT it left (now_ns +
 * reset_ns), in the same parameter era, moves back by n T (gcra.h's
 * cancel); FIXED: while the key's window is the admission's, its count
 * drops by n, and once the key has moved to a later window the
 * admission's window is over: SLUICE_EEXPIRED; INFLIGHT: a release of n.
 * Otherwise nothing is given back
 * and the permits stay counted (fewer admissions later, never more):
 * SLUICE_ECANCEL, also always for WINDOW (its buckets move on under every
 * decision of the key) and when the key is
 * no longer in the table (reclaimed fresh, or evicted).  The caller's
 * contract: each admission at most once, with at most the n it took.
 * Never creates a key.  Lock-free, no allocation; after a stop of any
 * length it gives nothing to a later owner of the slot or a later state of
 * the key (the decisions' pair CAS).
 * Return: 0; SLUICE_ECANCEL; SLUICE_EEXPIRED (FIXED: the admission's
 * window is over, nothing changed); SLUICE_EINVAL (NULL, n = 0, @admitted
 * not allowed); SLUICE_EKEYLEN; SLUICE_EBUSY (4096 retries: nothing changed);
 * INFLIGHT: as sluice_keyed_release().
 */
SLUICE_API int sluice_keyed_refund(sluice_keyed_t *k, const void *key, size_t keylen, uint64_t n,
                                   const sluice_decision_t *admitted);

/*
 * sluice_keyed_set_rate_at - change a GCRA or LEAKY table's rate to @rate
 * per @period_ns, for every key, in every process attached to the table,
 * at the reading @now (the table's timeline).
 * sluice_keyed_set_burst_at - change its bucket: GCRA's burst b, LEAKY's
 * depth D (the parameter the config calls depth), named burst for both.
 * sluice_keyed_set_limit_at - change a FIXED, WINDOW or INFLIGHT table's L
 * (K).  The plain variants read the handle's clock.
 *
 * Every key keeps its state: no refill, no reset; LIVE PARAMETERS says what
 * the state already counted means under the new parameters, what the
 * change guarantees to decisions whose readings are older than it, and
 * what happens when @now is older than readings already decided (GCRA,
 * LEAKY: the stamp is raised to within 65.5 us of the table's newest
 * reading, and each key's state is converted as at its own newest one;
 * FIXED, WINDOW: the stamp is @now).  Safe while
 * decisions run in any number of threads and processes: they never wait
 * for a change, and each uses either the old or the new parameters in
 * full.  Changes serialise on a lock in the table; a holder stopped past
 * SLUICE_KEYED_LEASE_MS is overtaken, so a call waits at most about that
 * long (yielding).  A control-path call; no allocation.
 * Return: 0; SLUICE_EINVAL (NULL); SLUICE_ENOTSUP (set_rate, set_burst on
 * FIXED, WINDOW, INFLIGHT; set_limit on GCRA, LEAKY); SLUICE_ETIME (@now at
 * or above 2^62); init's code for the new configuration (SLUICE_ERATE,
 * SLUICE_EBURST, SLUICE_ELIMIT, ...), and SLUICE_ELIMIT for a FIXED or
 * INFLIGHT limit wider than the count's bits (LIMITS); SLUICE_EBUSY when
 * (GCRA, LEAKY) the previous change is too recent (LIVE PARAMETERS: retry
 * once @now is past the previous change's newest reading by the larger
 * tau and what a key may still owe past it) or another setter
 * overtook this one: nothing changed.
 */
SLUICE_API int sluice_keyed_set_rate_at(sluice_keyed_t *k, uint64_t rate, uint64_t period_ns,
                                        uint64_t now);
SLUICE_API int sluice_keyed_set_rate(sluice_keyed_t *k, uint64_t rate, uint64_t period_ns);
SLUICE_API int sluice_keyed_set_burst_at(sluice_keyed_t *k, uint64_t burst, uint64_t now);
SLUICE_API int sluice_keyed_set_burst(sluice_keyed_t *k, uint64_t burst);
SLUICE_API int sluice_keyed_set_limit_at(sluice_keyed_t *k, uint64_t limit, uint64_t now);
SLUICE_API int sluice_keyed_set_limit(sluice_keyed_t *k, uint64_t limit);

/*
 * sluice_keyed_params - the parameters in force (one era's, never a mix).
 * Thread-safe, any process; stale as soon as another process changes them.
 * Return: 0, SLUICE_EINVAL, SLUICE_EBUSY (the era kept changing).
 */
SLUICE_API int sluice_keyed_params(const sluice_keyed_t *k, sluice_keyed_params_t *p);

/*
 * sluice_keyed_stats - the table's counters, summed over the statistics
 * cells (relaxed loads: each counter is exact once the callers have
 * stopped, otherwise off by the operations that ran during the call).
 * Thread-safe, any process.  Return: 0, SLUICE_EINVAL.
 */
SLUICE_API int sluice_keyed_stats(const sluice_keyed_t *k, sluice_keyed_stats_t *s);

#ifdef SLUICE_INLINE
#include "static/keyed.h"
#endif

#endif /* SLUICE_KEYED_H */
