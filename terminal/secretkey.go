package terminal

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"unicode/utf8"
)

// ErrSecretKey means the file holding the key of the hashes kept of
// secret answers is not a key (wrong size, not a regular file).
var ErrSecretKey = errors.New("terminal: bad secret key file")

// secretKeyBytes is the size of that key.
const secretKeyBytes = 32

// secretMACBytes is how much of the HMAC-SHA256 a store keeps: 128 bits,
// enough to tell two answers apart, nothing to recover one from.
const secretMACBytes = 16

// secretKey keys the hashes the stores keep of secret answers. Of a
// secret answer a store keeps its length and HMAC-SHA256(key, answer),
// never the answer: without the key, a stored hash of a four-digit PIN
// cannot be tried against the 10,000 PINs, as a bare hash could.
type secretKey struct{ k []byte }

// seal is what a store keeps of a secret answer: its length in characters
// and the hex of its keyed hash.
func (k *secretKey) seal(v string) (int, string) {
	m := hmac.New(sha256.New, k.k)
	io.WriteString(m, v)
	return utf8.RuneCountInString(v), hex.EncodeToString(m.Sum(nil)[:secretMACBytes])
}

// newSecretKey makes a key that lives in this process only.
func newSecretKey() (*secretKey, error) {
	k := make([]byte, secretKeyBytes)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("terminal: secret key: %w", err)
	}
	return &secretKey{k: k}, nil
}

// loadSecretKey reads the key at path, making it (32 random bytes) when
// the file does not exist. The file is 0600 whatever the umask (a looser
// existing file is tightened) in a directory created 0700; it is written
// whole to a temporary file and linked into place, so two daemons starting
// at once end with one key and never read half of one.
func loadSecretKey(path string) (*secretKey, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("terminal: secret key directory: %w", err)
	}
	k, err := readSecretKey(path)
	if !errors.Is(err, os.ErrNotExist) {
		return k, err
	}
	fresh, err := newSecretKey()
	if err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".terminal-key-*")
	if err != nil {
		return nil, fmt.Errorf("terminal: secret key: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(fresh.k)
	err = errors.Join(werr, tmp.Chmod(0o600), tmp.Sync(), tmp.Close())
	if err != nil {
		return nil, fmt.Errorf("terminal: secret key: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("terminal: secret key: %w", err)
	}
	return readSecretKey(path)
}

// readSecretKey reads an existing key file, refusing a symlink or any
// file that is not 32 bytes, and makes it 0600.
func readSecretKey(path string) (*secretKey, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%w: %s is a symbolic link", ErrSecretKey, path)
	}
	if err != nil {
		return nil, fmt.Errorf("terminal: secret key: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("terminal: secret key: %w", err)
	}
	if !st.Mode().IsRegular() || st.Size() != secretKeyBytes {
		return nil, fmt.Errorf("%w: %s must be a regular file of %d bytes", ErrSecretKey, path, secretKeyBytes)
	}
	if st.Mode().Perm() != 0o600 {
		if err := f.Chmod(0o600); err != nil {
			return nil, fmt.Errorf("terminal: secret key permissions: %w", err)
		}
	}
	k := make([]byte, secretKeyBytes)
	if _, err := io.ReadFull(f, k); err != nil {
		return nil, fmt.Errorf("terminal: secret key: %w", err)
	}
	return &secretKey{k: k}, nil
}
