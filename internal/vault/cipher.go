package vault

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
)

// A KeyMaterial is one key of a [Cipher]: 32 bytes, named by ID.
type KeyMaterial struct {
	ID     string
	Secret []byte
}

// A Cipher seals with its first key and opens with any of its keys, so
// that a key can be rotated: add the new one first, and keep the old
// until nothing sealed with it is left.
type Cipher struct {
	first string
	aeads map[string]cipher.AEAD
}

// NewCipher returns a cipher of keys, the first of which seals.
func NewCipher(keys []KeyMaterial) (*Cipher, error) {
	if len(keys) == 0 {
		return nil, errors.New("vault: no key")
	}
	c := &Cipher{first: keys[0].ID, aeads: make(map[string]cipher.AEAD, len(keys))}
	for _, k := range keys {
		if k.ID == "" || len(k.ID) > 255 {
			return nil, errors.New("vault: a key id must have 1 to 255 bytes")
		}
		if len(k.Secret) != 32 {
			return nil, fmt.Errorf("vault: key %q: not 32 bytes", k.ID)
		}
		if _, dup := c.aeads[k.ID]; dup {
			return nil, fmt.Errorf("vault: key %q listed twice", k.ID)
		}
		block, err := aes.NewCipher(k.Secret)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		c.aeads[k.ID] = aead
	}
	return c, nil
}

// Seal encrypts plain, authenticating aad too: the result is the key id's
// length (one byte), the key id, a random nonce and the ciphertext. The
// key id is authenticated as well.
func (c *Cipher) Seal(plain, aad []byte) []byte {
	aead := c.aeads[c.first]
	out := make([]byte, 0, 1+len(c.first)+aead.NonceSize()+len(plain)+aead.Overhead())
	out = append(out, byte(len(c.first)))
	out = append(out, c.first...)
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	out = append(out, nonce...)
	return aead.Seal(out, nonce, plain, c.aad(c.first, aad))
}

var errOpen = errors.New("vault: cannot decrypt")

// Open decrypts what Seal returned with the same aad, with the key it
// names.
func (c *Cipher) Open(sealed, aad []byte) ([]byte, error) {
	if len(sealed) < 1 {
		return nil, errOpen
	}
	n := int(sealed[0])
	if len(sealed) < 1+n {
		return nil, errOpen
	}
	id := string(sealed[1 : 1+n])
	aead, ok := c.aeads[id]
	if !ok {
		return nil, errOpen
	}
	rest := sealed[1+n:]
	if len(rest) < aead.NonceSize()+aead.Overhead() {
		return nil, errOpen
	}
	plain, err := aead.Open(nil, rest[:aead.NonceSize()], rest[aead.NonceSize():], c.aad(id, aad))
	if err != nil {
		return nil, errOpen
	}
	return plain, nil
}

func (c *Cipher) aad(id string, aad []byte) []byte {
	out := make([]byte, 0, len(id)+1+len(aad))
	out = append(out, id...)
	out = append(out, 0)
	return append(out, aad...)
}
