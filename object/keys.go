package object

import (
	"context"
	"crypto/rand"
	"fmt"

	"github.com/stratafs/stratafs/meta"
)

// Access keys are credentials, not objects, but they live in the meta
// store like everything else, and front ends reach the store only through
// the core.

// keyIDAlphabet and secretAlphabet are what AWS tools expect of an access
// key id (upper-case alphanumerics) and a secret (base64-like).
const (
	keyIDAlphabet  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	secretAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
)

// NewAccessKey returns a fresh credential with a random 20-character id
// ("SF…") and 40-character secret; it is not stored.
func NewAccessKey(name string, root bool) meta.AccessKey {
	return meta.AccessKey{ID: "SF" + randomString(keyIDAlphabet, 18), Secret: randomString(secretAlphabet, 40), Name: name, Root: root}
}

func randomString(alphabet string, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("object: reading random bytes: %v", err))
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// CreateAccessKey stores k, stamped with the current time; its id must be
// free (meta.ErrAccessKeyExists).
func (s *Service) CreateAccessKey(ctx context.Context, k meta.AccessKey) (meta.AccessKey, error) {
	k.Created = s.now()
	if err := s.meta.CreateAccessKey(ctx, k); err != nil {
		return meta.AccessKey{}, fmt.Errorf("create access key %s: %w", k.ID, err)
	}
	return k, nil
}

// AccessKey returns the credential with this id (meta.ErrNoSuchAccessKey).
func (s *Service) AccessKey(ctx context.Context, id string) (meta.AccessKey, error) {
	return s.meta.AccessKey(ctx, id)
}

// ListAccessKeys returns every credential, ordered by id.
func (s *Service) ListAccessKeys(ctx context.Context) ([]meta.AccessKey, error) {
	return s.meta.ListAccessKeys(ctx)
}

// DeleteAccessKey removes a credential. Buckets it owns stay; the root
// key can still use them.
func (s *Service) DeleteAccessKey(ctx context.Context, id string) error {
	return s.meta.DeleteAccessKey(ctx, id)
}
