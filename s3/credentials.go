package s3

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Credentials are an access key pair.
type Credentials struct {
	AccessKey string
	SecretKey string
}

// CredentialsProfile is the profile name under which the credentials file
// holds the root key: the file is an AWS shared credentials file, so
// AWS_SHARED_CREDENTIALS_FILE=FILE AWS_PROFILE=stratafs lets any AWS
// tool use it as it is.
const CredentialsProfile = "stratafs"

// NewCredentials generates a key pair: a 20-character access key id and a
// 40-character secret (200 random bits), both from A-Z and 2-7.
func NewCredentials() Credentials {
	return Credentials{
		AccessKey: ("SF" + rand.Text())[:20],
		SecretKey: (rand.Text() + rand.Text())[:40],
	}
}

// LoadOrCreateCredentials reads the key pair saved at path. When there is
// no such file it generates one and saves it there, readable by its owner
// only; created reports that case.
func LoadOrCreateCredentials(path string) (c Credentials, created bool, err error) {
	b, err := os.ReadFile(path)
	if err == nil {
		c, err = parseCredentials(b)
		if err != nil {
			return c, false, fmt.Errorf("credentials file %s: %w", path, err)
		}
		return c, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return c, false, err
	}
	c = NewCredentials()
	if err := saveCredentials(path, c); err != nil {
		return c, false, fmt.Errorf("saving credentials: %w", err)
	}
	return c, true, nil
}

// saveCredentials writes the file whole or not at all: a temporary file
// (mode 0600 from creation), synced, then renamed into place.
func saveCredentials(path string, c Credentials) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".credentials-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	fmt.Fprintf(tmp, "# stratafs root credentials. Keep this file secret.\n"+
		"# Usable as AWS_SHARED_CREDENTIALS_FILE with AWS_PROFILE=%s.\n[%s]\naws_access_key_id = %s\naws_secret_access_key = %s\n",
		CredentialsProfile, CredentialsProfile, c.AccessKey, c.SecretKey)
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// parseCredentials reads the access key pair of a credentials file.
func parseCredentials(b []byte) (Credentials, error) {
	var c Credentials
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		switch strings.TrimSpace(name) {
		case "aws_access_key_id":
			c.AccessKey = strings.TrimSpace(value)
		case "aws_secret_access_key":
			c.SecretKey = strings.TrimSpace(value)
		}
	}
	if c.AccessKey == "" || c.SecretKey == "" {
		return c, errors.New("aws_access_key_id or aws_secret_access_key missing")
	}
	return c, nil
}
