#!/usr/bin/env python3
"""Exhaustive check of the pipelined split-held kernel's ticket / wait protocol for deadlock.

Each block is one sequential process (its threads move together between barriers); the grid's
blocks all run at once (cooperative launch). A state is every block's program point plus the
shared counters; every interleaving of single steps is explored (BFS). A state where some block
has not exited and no block can step is a deadlock.

Forms (FORM):
  gather   - main's pipelined kernel: wait until every slice of the parked row is published.
  deferred - the merged kernel's first form: the completing block merges at the next loop top
             (deadlocked on the H100, session 39).
  merged   - the corrected form: merge at once when the new slice's row is the parked slice's
             row, else at the next loop top.
"""
import sys
from collections import deque

def explore(init, moves):
    """Breadth-first over every interleaving. moves(state) gives (alive, successors): whether
    some block has not exited, and the state after each block's possible step. Returns
    (deadlock-free, the first deadlocked state or None, states seen)."""
    seen = {init}
    q = deque([init])
    while q:
        st = q.popleft()
        alive, nexts = moves(st)
        if alive and not nexts:
            return False, st, len(seen)
        for ns in nexts:
            if ns not in seen:
                seen.add(ns); q.append(ns)
    return True, None, len(seen)

def stepped(blocks, b, nb, ctr, pub, merged):
    """The state after block b steps to nb, with the shared counters given."""
    nblocks = list(blocks); nblocks[b] = nb
    return (ctr, tuple(pub), tuple(merged), tuple(nblocks))

def check(form, G, S, R):
    total = R * S
    # block state: (pc, t, p, completes_flag, deferred)
    # pcs: 'draw0','take0','top','draw','take','wait','store','exit'
    init_blocks = tuple(('draw0', -1, -1, False, True) for _ in range(G))
    init = (0, (0,) * R, (False,) * R, init_blocks)  # ticket counter, published counts, merged flags

    def moves(st):
        ctr, pub, merged, blocks = st
        alive, nexts = False, []
        for b, (pc, t, p, comp, dfr) in enumerate(blocks):
            if pc == 'exit':
                continue
            alive = True
            nctr, npub, nmerged = ctr, list(pub), list(merged)
            nb = None
            if pc in ('draw0', 'draw'):
                nt = ctr; nctr = ctr + 1
                if pc == 'draw0':
                    nb = ('take0', nt, p, comp, dfr) if nt < total else ('exit', nt, p, comp, dfr)
                else:
                    nb = ('take', nt, p, comp, dfr)
            elif pc in ('take0', 'take'):
                if pc == 'take' and t >= total:
                    nb = ('wait', t, p, comp, dfr)
                else:
                    r = t // S
                    npub[r] += 1
                    c = npub[r] == S
                    if pc == 'take0':
                        nb = ('top', t, p, c, True)
                    else:
                        d = (t // S) != (p // S)
                        if form == 'gather':
                            nb = ('wait', t, p, c, d)
                        elif form == 'deferred':
                            nb = ('wait', t, p, c, True)
                        else:  # merged
                            if not d and c:
                                nmerged[r] = True
                            nb = ('wait', t, p, c, d)
            elif pc == 'top':
                # park; p = t; deferred merge of p's row if this block completed it
                np_ = t
                if form != 'gather' and dfr and comp:
                    nmerged[np_ // S] = True
                nb = ('draw', t, np_, False, dfr)
            elif pc == 'wait':
                r = p // S
                ok = pub[r] == S if form == 'gather' else merged[r]
                if not ok:
                    continue  # blocked
                nb = ('store', t, p, comp, dfr)
            elif pc == 'store':
                nb = ('exit', t, p, comp, dfr) if t >= total else ('top', t, p, comp, dfr)
            nexts.append(stepped(blocks, b, nb, nctr, npub, nmerged))
        return alive, nexts

    return explore(init, moves)

def check_deep(K, G, S, R):
    """A deeper pipeline (session 41, a design not built): each block parks up to K slices
    (a ring in shared memory) besides the one in its registers, and waits only when the ring is
    full, for its oldest parked slice's row. The block whose take completes a row merges it at
    once (a merged word per row, as the merged kernel), before it waits for anything. Once the
    tickets run out, a block drains its ring oldest first. Returns as check() does."""
    total = R * S
    init_blocks = tuple(('draw', -1, ()) for _ in range(G))  # (pc, register ticket, parked)
    init = (0, (0,) * R, (False,) * R, init_blocks)

    def moves(st):
        ctr, pub, merged, blocks = st
        alive, nexts = False, []
        for b, (pc, t, parked) in enumerate(blocks):
            if pc == 'exit':
                continue
            alive = True
            nctr, npub, nmerged = ctr, list(pub), list(merged)
            if pc == 'draw':
                nctr = ctr + 1
                nb = ('take', ctr, parked) if ctr < total else ('drain', -1, parked)
            elif pc == 'take':
                r = t // S
                npub[r] += 1
                if npub[r] == S:
                    nmerged[r] = True  # merged at once by the completing block
                nb = ('draw', -1, parked + (t,)) if len(parked) < K else ('wait', t, parked)
            elif pc == 'wait':  # ring full: store the oldest once its row is merged, park t
                if not merged[parked[0] // S]:
                    continue
                nb = ('draw', -1, parked[1:] + (t,))
            else:  # drain
                if not parked:
                    nb = ('exit', -1, ())
                elif not merged[parked[0] // S]:
                    continue
                else:
                    nb = ('drain', -1, parked[1:])
            nexts.append(stepped(blocks, b, nb, nctr, npub, nmerged))
        return alive, nexts

    return explore(init, moves)

if __name__ == '__main__' and len(sys.argv) > 1 and sys.argv[1] == 'deep':
    # python3 protocol.py deep: the K = 2 ring, up to one slice past the expected bound
    # (S <= (K + 1) * G)
    K = 2
    for G in (1, 2, 3):
        for S in range(1, (K + 1) * G + 2):
            for R in ((1, 2, 3) if G < 3 else (1, 2)):
                ok, st, n = check_deep(K, G, S, R)
                print(f"deep K={K} G={G} S={S} R={R}: {'ok' if ok else 'DEADLOCK'} ({n} states)"
                      + ('' if ok else f' at {st}'))
    sys.exit(0)

if __name__ == '__main__':
    bad = 0
    for form in ('gather', 'deferred', 'merged'):
        for G in (1, 2, 3):
            for S in range(1, 2 * G):          # the host's bound: slices <= 2 * grid - 1
                for R in (1, 2, 3):
                    ok, st, n = check(form, G, S, R)
                    if not ok:
                        bad += 1
                    print(f"{form:8s} G={G} S={S} R={R}: {'ok' if ok else 'DEADLOCK'} ({n} states)"
                          + ('' if ok else f' at {st}'))
    sys.exit(0)
