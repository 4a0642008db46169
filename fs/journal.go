package fs

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// The mount commits what it changes behind the calls that change it: a
// close, an unlink, a rename or a mkdir prepares its write with the core
// (object.Prepare: the bytes are made durable in the chunk store, or kept
// inline, and the rows are built, their version ids issued) and queues
// it in the journal; a goroutine commits the queue in batches, each one
// meta-store commit, so that they share its fsync. Nobody waits for a
// queued change but an fsync or a question to the store (see wait): while
// nobody does, the committer lingers, so that the changes made meanwhile
// share the commit; as soon as somebody waits, it commits what is queued
// at once. A commit costs two fsyncs whatever it holds, and every B+tree
// leaf it changes is read, rewritten and written whole, so changes that
// share a commit share those costs too: committing every close alone
// spends more of the machine on fsyncs than on the closes, and a burst of
// renames of neighbouring names costs less per rename the more of them a
// commit holds (see lingerMax).
//
// A batch the store refuses for a reason that passes (it cannot be
// reached, its disk is full: see transient) stays in flight and is tried
// again, with growing pauses, until it commits, fails for another reason,
// or the journal has been closing for closeGrace. Meanwhile whoever waits
// for a change (fsync, a question to the store) is answered with the
// last attempt's error at once, and the change stays queued: a file
// closed while the store is away is committed once it is back.
//
// Batches commit one at a time in queue order, and a batch never holds
// two changes of one key (the second starts the next batch), so the
// changes of a key commit in the order they were made and each one's
// checks see the ones before it. The mount shows its queued changes
// itself: the inodes that made them answer for them, and a question put
// to the store about a name or a directory with changes queued first
// waits for them (see settle).
const (
	// maxQueued bounds the changes waiting to be committed, and so the
	// memory they hold (inline bytes, rows); past it, writers wait.
	maxQueued = 4096
	// maxBatch bounds the mutations of one commit. A change bigger than
	// that (a directory rename) is committed alone.
	maxBatch = 1024
	// While nobody waits for the changes queued, the committer waits for
	// more until none has come for quiet, or for lingerMax at most: a
	// lone change commits quiet after it was made, and a burst in
	// batches of what lingerMax gathers. lingerMax bounds how much later
	// than necessary readers of the store see a change. Committing 4 KiB
	// files' renames in batches of 60, 150, 300 and 500 took 24–27, 19–21,
	// 18–20 and 17–19 µs of CPU per rename (BenchmarkRenamePrepared's
	// code, 2 runs, 2026-12-05); the mount renames about 7,000 files a
	// second with one thread, 60 in the 5 ms it used to linger.
	quiet     = 5 * time.Millisecond
	lingerMax = 25 * time.Millisecond
	// retryMin and retryMax bound the pause between two attempts at a
	// batch the store refused for a reason that passes.
	retryMin = 50 * time.Millisecond
	retryMax = 5 * time.Second
	// closeGrace is how long a closing journal keeps trying such a batch
	// before it fails what is left.
	closeGrace = 30 * time.Second
)

// A change is one write of the mount, prepared and queued for commit.
type change struct {
	p    *object.Pending // nil once the change has finished
	keys []string
	// failed, if set, is called on the committing goroutine when the
	// change fails; it must not block.
	failed func(error)
	// waiting is set while the change is in the queue, not yet taken
	// for a commit; guarded by the journal's mutex.
	waiting bool
	done    chan struct{} // closed once the change committed or failed
	err     error         // why it failed; set before done is closed
}

// finished reports whether c has committed or failed.
func (c *change) finished() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// touches reports whether c changes one of names; a name that ends in
// "/", or is "", stands for every key under it.
func (c *change) touches(names []string) bool {
	return slices.ContainsFunc(c.keys, func(k string) bool {
		return slices.ContainsFunc(names, func(n string) bool { return k == n || under(n) && strings.HasPrefix(k, n) })
	})
}

// under reports whether name stands for every key under it.
func under(name string) bool { return name == "" || strings.HasSuffix(name, "/") }

// A queuedHead is the row a change puts at the head of a key: a version,
// a delete marker, or nil for a key it removes (the mount deletes no
// given version: nil is the DELETE of an unversioned key).
type queuedHead struct {
	v *meta.Version
	c *change
}

// gone reports whether the key has no live version once the change
// commits.
func (h queuedHead) gone() bool { return h.v == nil || h.v.DeleteMarker }

// maxTouched is how many of the last keys changed a journal remembers at
// least; it forgets the older ones in bulk.
const maxTouched = maxQueued

// A touch is a change of key, numbered seq.
type touch struct {
	key string
	seq uint64
}

// A journal queues the mount's changes and commits them.
type journal struct {
	svc    *object.Service
	bucket string
	log    *slog.Logger
	own    *ownKeys
	// failed is told the keys of a change that failed: the kernel must
	// forget what the mount showed of them.
	failed func(key string)

	mu       sync.Mutex
	space    sync.Cond // signalled as changes leave the queue
	queue    []*change // waiting, in order
	inflight []*change // being committed
	// keys counts the changes queued or in flight per key, dirs per
	// directory prefix ("" for the root) that their keys lie under: they
	// answer "is anything pending there?" without a scan.
	keys, dirs map[string]int
	// heads holds, per key with changes queued or in flight, the row the
	// last of them puts at its head, so that listings show the mount's
	// changes before they commit (see listPager).
	heads map[string]queuedHead
	// seq numbers the changes as they are queued or amended; touched
	// holds, per key changed lately, the number of its last change, so
	// that a listing can tell the names changed since it read them (see
	// changedSince). Whenever touches holds twice maxTouched, it forgets
	// all but the last maxTouched; floor is the number of the last touch
	// forgotten.
	seq     uint64
	touched map[string]uint64
	touches []touch
	floor   uint64
	closed  bool
	waiters int // goroutines waiting for changes to commit
	// stuck is the error of the last attempt at the batch in flight
	// while the store refuses it for a reason that passes; nil
	// otherwise. refused is closed when an attempt fails so, and then
	// replaced.
	stuck   error
	refused chan struct{}
	// giveUp is when a closing journal stops trying again (see
	// closeGrace); zero until then.
	giveUp time.Time

	wake  chan struct{} // something was queued
	hurry chan struct{} // somebody waits, or the batch is full
	done  chan struct{}
}

func newJournal(svc *object.Service, bucket string, log *slog.Logger, own *ownKeys, failed func(string)) *journal {
	j := &journal{svc: svc, bucket: bucket, log: log, own: own, failed: failed,
		keys: map[string]int{}, dirs: map[string]int{}, heads: map[string]queuedHead{}, touched: map[string]uint64{},
		refused: make(chan struct{}), wake: make(chan struct{}, 1), hurry: make(chan struct{}, 1), done: make(chan struct{})}
	j.space.L = &j.mu
	go j.run()
	return j
}

// add queues p, waiting while the queue is full. failed, if not nil, is
// called should the commit fail.
func (j *journal) add(p *object.Pending, failed func(error)) *change {
	c := &change{p: p, keys: p.Keys(), failed: failed, waiting: true, done: make(chan struct{})}
	j.mu.Lock()
	for len(j.queue) >= maxQueued {
		j.space.Wait()
	}
	j.queue = append(j.queue, c)
	j.count(c, 1)
	j.setHeads(c, false)
	j.touchLocked(c.keys)
	full := len(j.queue) >= maxBatch
	j.mu.Unlock()
	signal(j.wake)
	if full {
		signal(j.hurry)
	}
	return c
}

// signal wakes the goroutine waiting on ch, if any, without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// amend runs fn on c's write if c is still waiting in the queue, and
// reports whether it ran: a change taken for a commit cannot change any
// more. c may be nil.
func (j *journal) amend(c *change, fn func(*object.Pending) error) (bool, error) {
	if c == nil {
		return false, nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if !c.waiting {
		return false, nil
	}
	err := fn(c.p)
	j.setHeads(c, true)
	j.touchLocked(c.keys)
	return true, err
}

// touchLocked numbers a change of keys queued or amended now.
func (j *journal) touchLocked(keys []string) {
	j.seq++
	for _, k := range keys {
		j.touched[k] = j.seq
		j.touches = append(j.touches, touch{k, j.seq})
	}
	if len(j.touches) < 2*maxTouched {
		return
	}
	old := j.touches[:len(j.touches)-maxTouched]
	for _, t := range old {
		if j.touched[t.key] == t.seq {
			delete(j.touched, t.key)
		}
	}
	j.floor = old[len(old)-1].seq
	j.touches = slices.Delete(j.touches, 0, len(old))
}

// setHeads records the rows c puts at the heads of its keys. An amended
// change may have later changes of its keys behind it: their rows stay.
func (j *journal) setHeads(c *change, amended bool) {
	for i, v := range c.p.Heads() {
		if k := c.keys[i]; !amended || j.heads[k].c == c {
			j.heads[k] = queuedHead{v: v, c: c}
		}
	}
}

// queued returns the row with id that a change queued or in flight puts
// at key's head, nil if none does.
func (j *journal) queued(key string, id meta.VersionID) *meta.Version {
	j.mu.Lock()
	defer j.mu.Unlock()
	if v := j.heads[key].v; v != nil && v.ID == id {
		return v
	}
	return nil
}

// dropHeads forgets the heads c put, once it has committed or failed:
// the store answers for them.
func (j *journal) dropHeads(c *change) {
	for _, k := range c.keys {
		if j.heads[k].c == c {
			delete(j.heads, k)
		}
	}
}

// headsUnder returns the heads of the keys under prefix ("" for every
// key) with changes queued or in flight, nil when there are none, and
// the number of the last change queued: what changedSince asks about.
func (j *journal) headsUnder(prefix string) (map[string]queuedHead, uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.dirs[prefix] == 0 {
		return nil, j.seq
	}
	heads := map[string]queuedHead{}
	for k, h := range j.heads {
		if strings.HasPrefix(k, prefix) {
			heads[k] = h
		}
	}
	return heads, j.seq
}

// changedSince reports whether a change of key was queued (or amended)
// after the one numbered seq, or may have been: true when the journal
// has forgotten changes made since.
func (j *journal) changedSince(key string, seq uint64) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return seq < j.floor || j.touched[key] > seq
}

// count adds d to the counts of c's keys and of the directories above them.
func (j *journal) count(c *change, d int) {
	for _, k := range c.keys {
		bump(j.keys, k, d)
		bump(j.dirs, "", d)
		for i := range len(k) {
			if k[i] == '/' {
				bump(j.dirs, k[:i+1], d)
			}
		}
	}
}

func bump(m map[string]int, k string, d int) {
	if m[k] += d; m[k] == 0 {
		delete(m, k)
	}
}

// pendingKey reports whether a change to exactly key is queued or in
// flight.
func (j *journal) pendingKey(key string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.keys[key] > 0
}

// pending reports whether a change to key is queued or in flight; a key
// that ends in "/", or is "", stands for every key under it.
func (j *journal) pending(key string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.pendingLocked(key)
}

func (j *journal) pendingLocked(key string) bool {
	if under(key) {
		return j.dirs[key] > 0
	}
	return j.keys[key] > 0
}

// settle waits until the changes to names queued before the call have
// committed (or failed), so that the store answers for them; names are
// as for pending. Changes queued later are not waited for: a question
// asked while they are made may see them or not.
func (j *journal) settle(names ...string) {
	j.mu.Lock()
	var last *change
	if slices.ContainsFunc(names, j.pendingLocked) {
		last = j.lastLocked(func(c *change) bool { return c.touches(names) })
	}
	j.mu.Unlock()
	if last != nil {
		j.wait(last)
	}
}

// sync waits until every change queued before the call has committed,
// and returns the store's error if they are still queued (see wait).
func (j *journal) sync() error {
	j.mu.Lock()
	last := j.lastLocked(func(*change) bool { return true })
	j.mu.Unlock()
	if last != nil {
		if err := j.wait(last); err != nil && !last.finished() {
			return err
		}
	}
	return nil
}

// wait waits until c has committed, and returns its error. While the
// store refuses the batch in flight for a reason that passes, it returns
// at once, or as soon as the store refuses it, with the store's error; c
// is then still queued. The committer does not linger meanwhile.
func (j *journal) wait(c *change) error {
	j.mu.Lock()
	if err := j.stuck; err != nil && !c.finished() {
		j.mu.Unlock()
		return err
	}
	j.waiters++
	refused := j.refused
	j.mu.Unlock()
	signal(j.hurry)
	var err error
	select {
	case <-c.done:
		err = c.err
	case <-refused:
	}
	j.mu.Lock()
	j.waiters--
	if !c.finished() {
		err = j.stuck
	}
	j.mu.Unlock()
	return err
}

// lastLocked returns the last change queued or in flight for which match
// is true. Changes finish in queue order: when it has, so have the
// changes before it.
func (j *journal) lastLocked(match func(*change) bool) *change {
	for _, cs := range [][]*change{j.queue, j.inflight} {
		for i := len(cs) - 1; i >= 0; i-- {
			if match(cs[i]) {
				return cs[i]
			}
		}
	}
	return nil
}

// close commits what is queued, then stops the journal.
func (j *journal) close() {
	j.mu.Lock()
	j.closed = true
	j.mu.Unlock()
	signal(j.wake)
	signal(j.hurry)
	<-j.done
}

func (j *journal) run() {
	defer close(j.done)
	for {
		j.mu.Lock()
		if len(j.queue) == 0 {
			closed := j.closed
			j.mu.Unlock()
			if closed {
				return
			}
			<-j.wake
			continue
		}
		if j.waiters == 0 && !j.closed && len(j.queue) < maxBatch {
			j.mu.Unlock()
			j.linger()
			j.mu.Lock()
		}
		batch := j.nextLocked()
		j.mu.Unlock()
		j.commit(batch)
		j.mu.Lock()
		for _, c := range batch {
			j.count(c, -1)
			j.dropHeads(c)
			// The inode that made the change keeps it (fileNode.last)
			// while the kernel keeps the inode; its rows, and a small
			// file's bytes in them, are the store's now.
			c.p = nil
			close(c.done)
		}
		j.inflight = nil
		j.space.Broadcast()
		j.mu.Unlock()
	}
}

// linger waits for more changes to join the queue's (see lingerMax)
// until none has come for quiet, lingerMax has passed, or somebody waits
// or the batch is full. It looks at the queue every quiet rather than
// listening for each change: waking the committer for every change cost
// the changes a goroutine wake-up each.
func (j *journal) linger() {
	lull := time.NewTimer(quiet)
	defer lull.Stop()
	for waited := time.Duration(0); waited < lingerMax; waited += quiet {
		j.mu.Lock()
		seen := j.seq
		j.mu.Unlock()
		select {
		case <-lull.C:
		case <-j.hurry:
			return
		}
		j.mu.Lock()
		quietNow := j.seq == seen
		j.mu.Unlock()
		if quietNow {
			return
		}
		lull.Reset(quiet)
	}
}

// nextLocked moves the next batch from the queue to inflight: the changes
// at the head of the queue up to the first that changes a key one of
// them changes, or that would pass maxBatch.
func (j *journal) nextLocked() []*change {
	seen := map[string]bool{}
	n, size := 0, 0
	for _, c := range j.queue {
		if n > 0 && (size+len(c.keys) > maxBatch || slices.ContainsFunc(c.keys, func(k string) bool { return seen[k] })) {
			break
		}
		for _, k := range c.keys {
			seen[k] = true
		}
		c.waiting = false
		n++
		size += len(c.keys)
	}
	j.inflight = slices.Clone(j.queue[:n])
	j.queue = slices.Delete(j.queue, 0, n)
	return j.inflight
}

// commit commits a batch in one commit. Should that fail, the changes are
// committed one by one, so that only the one at fault fails.
func (j *journal) commit(batch []*change) {
	ps := make([]*object.Pending, len(batch))
	var keys []string
	for i, c := range batch {
		ps[i] = c.p
		keys = append(keys, c.keys...)
	}
	// Changes the kernel made itself need no invalidation; other mounts
	// are told without this goroutine waiting (see watch).
	release := j.own.hold(keys...)
	qualified := make([]string, len(keys))
	for i, k := range keys {
		qualified[i] = j.bucket + "/" + k
	}
	releaseJournaled := journaled.hold(qualified...)
	err := j.commitPending(ps...)
	if err != nil && len(batch) > 1 {
		for _, c := range batch {
			c.err = j.commitPending(c.p)
		}
	} else {
		for _, c := range batch {
			c.err = err
		}
	}
	release()
	releaseJournaled()
	for _, c := range batch {
		if c.err == nil {
			continue
		}
		j.log.Error("stratafs: commit failed", "bucket", j.bucket, "keys", c.keys, "err", c.err)
		for _, k := range c.keys {
			j.failed(k)
		}
		if c.failed != nil {
			c.failed(c.err)
		}
	}
}

// commitPending commits ps in one commit, trying again while the store
// refuses it for a reason that passes (see the journal's doc).
func (j *journal) commitPending(ps ...*object.Pending) error {
	pause := retryMin
	for {
		err := j.svc.CommitPending(context.Background(), ps...)
		j.mu.Lock()
		if err != nil && j.closed && j.giveUp.IsZero() {
			j.giveUp = time.Now().Add(closeGrace)
		}
		if err == nil || !transient(err) || j.closed && time.Now().After(j.giveUp) {
			if j.stuck != nil && err == nil {
				j.log.Info("stratafs: the store takes commits again", "bucket", j.bucket)
			}
			j.stuck = nil
			j.mu.Unlock()
			return err
		}
		if j.stuck == nil {
			j.log.Warn("stratafs: the store refused a commit; trying again until it takes it", "bucket", j.bucket, "err", err)
		}
		j.stuck = err
		close(j.refused)
		j.refused = make(chan struct{})
		j.mu.Unlock()
		time.Sleep(pause)
		pause = min(2*pause, retryMax)
	}
}

// transient reports whether a commit failed for a reason that passes: a
// store that did not answer, a full disk.
func transient(err error) bool {
	return errors.Is(err, meta.ErrUnavailable) || errors.Is(err, data.ErrUnavailable) || meta.IsNoSpace(err)
}
