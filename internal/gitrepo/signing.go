package gitrepo

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
)

// Keys of a signing Secret's data.
const (
	// SecretOpenPGPKey holds an armored OpenPGP private key.
	SecretOpenPGPKey = "git.asc"
	// SecretSSHSigningKey holds an SSH private key in PEM form.
	SecretSSHSigningKey = "identity"
	// SecretPassphrase holds the passphrase of either key, if it has one.
	SecretPassphrase = "passphrase"
)

// sshSigNamespace is the namespace git signs and verifies commits in.
const sshSigNamespace = "git"

// Signer signs commits with an OpenPGP key or, in git's SSH signature format,
// with an SSH key. Both verify with `git verify-commit`.
type Signer struct {
	openpgp *openpgp.Entity
	ssh     ssh.Signer
}

// NewSigner returns the Signer for the data of a signing Secret: git.asc (an
// armored OpenPGP private key) or identity (an SSH private key), each with an
// optional passphrase. Errors wrap ErrInvalidSecret and hold no key material.
func NewSigner(data map[string][]byte) (*Signer, error) {
	passphrase := data[SecretPassphrase]
	switch {
	case len(data[SecretOpenPGPKey]) > 0:
		entity, err := openPGPEntity(data[SecretOpenPGPKey], passphrase)
		if err != nil {
			return nil, fmt.Errorf("%w: reading %s: %w", ErrInvalidSecret, SecretOpenPGPKey, err)
		}
		return &Signer{openpgp: entity}, nil
	case len(data[SecretSSHSigningKey]) > 0:
		var (
			signer ssh.Signer
			err    error
		)
		if len(passphrase) > 0 {
			signer, err = ssh.ParsePrivateKeyWithPassphrase(data[SecretSSHSigningKey], passphrase)
		} else {
			signer, err = ssh.ParsePrivateKey(data[SecretSSHSigningKey])
		}
		if err != nil {
			return nil, fmt.Errorf("%w: reading %s: %w", ErrInvalidSecret, SecretSSHSigningKey, err)
		}
		return &Signer{ssh: signer}, nil
	default:
		return nil, fmt.Errorf("%w: neither %s nor %s is set", ErrInvalidSecret, SecretOpenPGPKey, SecretSSHSigningKey)
	}
}

func openPGPEntity(armored, passphrase []byte) (*openpgp.Entity, error) {
	entities, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(armored))
	if err != nil {
		return nil, err
	}
	if len(entities) == 0 || entities[0].PrivateKey == nil {
		return nil, errors.New("no private key")
	}
	entity := entities[0]
	if entity.PrivateKey.Encrypted {
		if len(passphrase) == 0 {
			return nil, errors.New("the key is encrypted and no passphrase is set")
		}
		if err := entity.DecryptPrivateKeys(passphrase); err != nil {
			return nil, errors.New("decrypting the key with the passphrase failed")
		}
	}
	return entity, nil
}

// apply makes go-git sign the commit with s.
func (s *Signer) apply(o *git.CommitOptions) {
	if s != nil {
		o.Signer = s
	}
}

// sign signs commit with s, as go-git's Worktree.Commit does: the commit
// encoded without a signature is signed and the signature goes into its
// gpgsig header. A nil Signer leaves it unsigned.
func (s *Signer) sign(commit *object.Commit) error {
	if s == nil {
		return nil
	}
	encoded := &plumbing.MemoryObject{}
	if err := commit.EncodeWithoutSignature(encoded); err != nil {
		return fmt.Errorf("encoding the commit to sign: %w", err)
	}
	r, err := encoded.Reader()
	if err != nil {
		return fmt.Errorf("encoding the commit to sign: %w", err)
	}
	sig, err := s.Sign(r)
	if err != nil {
		return err
	}
	commit.PGPSignature = string(sig)
	return nil
}

// Sign returns the armored signature of message that git stores in a
// commit's gpgsig header: an OpenPGP detached signature, or an SSH
// signature in the "git" namespace. It makes Signer a go-git Signer.
func (s *Signer) Sign(message io.Reader) ([]byte, error) {
	if s.openpgp != nil {
		var b bytes.Buffer
		if err := openpgp.ArmoredDetachSign(&b, s.openpgp, message, nil); err != nil {
			return nil, fmt.Errorf("signing commit with OpenPGP key: %w", err)
		}
		return b.Bytes(), nil
	}
	sig, err := sshsig.Sign(message, s.ssh, sshsig.HashSHA512, sshSigNamespace)
	if err != nil {
		return nil, fmt.Errorf("signing commit with SSH key: %w", err)
	}
	return sshsig.Armor(sig), nil
}
