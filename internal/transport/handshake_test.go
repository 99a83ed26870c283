package transport

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"testing"
)

// TestHandshake runs both sides over a pipe: a matching pair authenticates,
// and each kind of mismatch is refused at both ends with the right error.
func TestHandshake(t *testing.T) {
	good := hello{version: version, kind: kindSnapshot, cluster: cluster, from: 1, to: 2, nonce: newNonce()}
	for _, c := range []struct {
		name                 string
		edit                 func(*hello)
		clientSecret         string
		skipCheck            bool // the client gives its proof without checking the server's
		clientErr, serverErr error
	}{
		{"accepted", func(*hello) {}, string(secret), false, nil, nil},
		{"wrong secret", func(*hello) {}, "other", false, ErrAuth, ErrRefused},
		{"wrong secret, unchecked", func(*hello) {}, "other", true, ErrRefused, ErrAuth},
		{"other cluster", func(h *hello) { h.cluster++ }, string(secret), false, ErrRefused, ErrHandshake},
		{"other node", func(h *hello) { h.to = 3 }, string(secret), false, ErrRefused, ErrHandshake},
		{"node 0", func(h *hello) { h.from = 0 }, string(secret), false, ErrRefused, ErrHandshake},
		{"unknown kind", func(h *hello) { h.kind = 9 }, string(secret), false, ErrRefused, ErrHandshake},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := good
			c.edit(&h)
			cc, sc := net.Pipe()
			defer cc.Close()
			defer sc.Close()
			client := handshake{r: &frameReader{r: bufio.NewReader(cc), max: maxHandshakeFrame}, w: cc, secret: []byte(c.clientSecret)}
			server := handshake{r: &frameReader{r: bufio.NewReader(sc), max: maxHandshakeFrame}, w: sc, secret: secret}
			clientErr := make(chan error, 1)
			go func() {
				if c.skipCheck {
					clientErr <- client.unchecked(h)
				} else {
					err := client.client(h)
					if errors.Is(err, ErrAuth) {
						client.send(typeStatus, []byte(err.Error()))
					}
					clientErr <- err
				}
				cc.Close()
			}()
			got, err := server.server(cluster, 2)
			if err == nil {
				err = server.send(typeStatus, nil)
			} else if !errors.Is(err, ErrRefused) {
				server.send(typeStatus, []byte(err.Error()))
			}
			sc.Close()
			if !is(err, c.serverErr) {
				t.Errorf("server: %v, want %v", err, c.serverErr)
			}
			if err == nil && got != h {
				t.Errorf("server got hello %+v, want %+v", got, h)
			}
			if err := <-clientErr; !is(err, c.clientErr) {
				t.Errorf("client: %v, want %v", err, c.clientErr)
			}
		})
	}
}

// is is errors.Is, but a nil target matches only nil.
func is(err, target error) bool {
	if target == nil {
		return err == nil
	}
	return errors.Is(err, target)
}

// unchecked is a client that gives its proof without checking the
// server's, as one that does not know the secret would, to see the server
// refuse it.
func (hs *handshake) unchecked(h hello) error {
	hp := h.encode()
	if err := hs.send(typeHello, hp); err != nil {
		return err
	}
	ch, err := hs.expect(typeChallenge, challengeLen)
	if err != nil {
		return err
	}
	if err := hs.send(typeProof, proof(hs.secret, clientLabel, hp, ch[:nonceLen])); err != nil {
		return err
	}
	return hs.accepted()
}

// TestReadCaller reads a hello as a relay would: the caller's id and the
// frame unchanged, and an error for anything but a hello.
func TestReadCaller(t *testing.T) {
	h := hello{version: version, kind: kindMessages, cluster: cluster, from: 7, to: 2, nonce: newNonce()}
	sent := appendFrame(nil, typeHello, 0, h.encode())
	frame, from, err := ReadCaller(bytes.NewReader(append(bytes.Clone(sent), "rest"...)))
	if err != nil || from != 7 || !bytes.Equal(frame, sent) {
		t.Fatalf("ReadCaller = %x, %d, %v; want the hello and 7", frame, from, err)
	}
	for name, bad := range map[string][]byte{
		"proof first": appendFrame(nil, typeProof, 0, make([]byte, macLen)),
		"bad magic":   appendFrame(nil, typeHello, 0, []byte("GET / HTTP/1.1\r\n")),
		"cut":         sent[:len(sent)-1],
	} {
		if _, _, err := ReadCaller(bytes.NewReader(bad)); err == nil {
			t.Errorf("%s: ReadCaller succeeded", name)
		}
	}
}
