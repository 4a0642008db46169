package s3

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
	"github.com/stratafs/stratafs/s3/sigv4"
)

// keyring finds the secret of an access key among the configured keys,
// then among those stored in the meta store (stratafs key create). Stored
// keys are looked up on every request, so a deleted key stops working at
// once.
type keyring struct {
	fixed sigv4.Keys // nil: none
	svc   *object.Service
}

// SecretKey implements sigv4.Keys.
func (k keyring) SecretKey(ctx context.Context, id string) (string, error) {
	if k.fixed != nil {
		s, err := k.fixed.SecretKey(ctx, id)
		if !errors.Is(err, sigv4.ErrUnknownAccessKey) {
			return s, err
		}
	}
	ak, err := k.svc.AccessKey(ctx, id)
	switch {
	case errors.Is(err, meta.ErrNoSuchAccessKey):
		return "", fmt.Errorf("%q: %w", id, sigv4.ErrUnknownAccessKey)
	case err != nil:
		return "", fmt.Errorf("looking up access key %q: %w", id, err)
	}
	return ak.Secret, nil
}

// requester is the owner, as the meta store records owners, that a
// request signed with access key id acts as: "" (the root, who may use
// every bucket) for the root key and for stored keys marked Root; the
// key's id for every other key, each an owner of its own.
func (h *Handler) requester(ctx context.Context, id string) (string, error) {
	if id == h.cfg.RootAccessKey {
		return "", nil
	}
	if h.cfg.Keys != nil {
		if _, err := h.cfg.Keys.SecretKey(ctx, id); err == nil {
			return id, nil
		}
	}
	k, err := h.svc.AccessKey(ctx, id)
	if err != nil {
		return "", fmt.Errorf("looking up access key %q: %w", id, err)
	}
	if k.Root {
		return "", nil
	}
	return id, nil
}

// ownerOf shows an owner of the meta store (an access key id; "" is the
// root) as an S3 canonical user: a stable 64-hex id, and as display name
// the name its key was created with, else the key id. Each owner is
// looked up once per request.
func (h *Handler) ownerOf(q *request, id string) *Owner {
	if o, ok := q.owners[id]; ok {
		return o
	}
	display := id
	if id == "" {
		display = "root"
	} else if k, err := h.svc.AccessKey(q.ctx, id); err == nil && k.Name != "" {
		display = k.Name
	}
	sum := sha256.Sum256([]byte("stratafs owner\x00" + id))
	o := &Owner{ID: hex.EncodeToString(sum[:]), DisplayName: display}
	if q.owners == nil {
		q.owners = make(map[string]*Owner)
	}
	q.owners[id] = o
	return o
}
