package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// identity is one client certificate: the API server maps CN to the user, O to groups.
type identity struct{ file, cn, org string }

// runCerts writes a throw-away CA, the API server's loopback serving certificate, the client
// certificates of the components that use their usual identities, and the service-account key.
// Every key is ECDSA P-256, as hack/make-extender-certs.sh makes the extender's: kube-scheduler
// keeps at most 2 idle connections to an extender and resumes no TLS session, so it does full
// handshakes often, and a P-256 signature costs a fraction of an RSA-2048 one. Nothing here needs
// RSA: the API server, the kubelets and client-go take EC keys for TLS, and service-account
// tokens are signed ES256 with an EC key (upstream pkg/serviceaccount/jwt.go,
// signerFromECDSAPrivateKey; the issuer discovery document lists ES256 too,
// pkg/serviceaccount/openidmetadata.go). Only an outside relying party that accepts RS256 alone
// would need an RSA service-account key, and the test cluster has none. The leaves carry no
// KeyEncipherment usage: an EC key signs and never decrypts a key exchange (RFC 5480).
func runCerts(args []string) int {
	fs := flag.NewFlagSet("certs", flag.ContinueOnError)
	dir := fs.String("dir", "", "output directory (required)")
	nodes := fs.String("nodes", "", "comma-separated kubelet node names")
	if err := fs.Parse(args); err != nil || *dir == "" {
		fmt.Fprintln(os.Stderr, "certs: --dir is required")
		return 2
	}
	if err := writeCerts(*dir, *nodes); err != nil {
		fmt.Fprintln(os.Stderr, "certs:", err)
		return 1
	}
	return 0
}

func writeCerts(dir, nodes string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ca, caKey, err := newCert(dir, "ca", &x509.Certificate{
		Subject: pkix.Name{CommonName: "vgpu-testcluster-ca"}, IsCA: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true,
	}, nil, nil)
	if err != nil {
		return err
	}
	serving := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if _, _, err := newCert(dir, "apiserver", serving, ca, caKey); err != nil {
		return err
	}
	ids := []identity{
		{"admin", "testcluster-admin", "system:masters"},
		{"scheduler", "system:kube-scheduler", ""},
		{"controller-manager", "system:kube-controller-manager", ""},
		{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters"},
		{"extender", "vgpu-extender", ""},
		{"extender-client", "vgpu-scheduler-extender-client", ""},
	}
	for _, n := range strings.Split(nodes, ",") {
		if n != "" {
			ids = append(ids, identity{"kubelet-" + n, "system:node:" + n, "system:nodes"})
		}
	}
	for _, id := range ids {
		tmpl := &x509.Certificate{
			Subject:     pkix.Name{CommonName: id.cn},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
			DNSNames:    []string{"localhost"},
		}
		if id.org != "" {
			tmpl.Subject.Organization = []string{id.org}
		}
		if _, _, err := newCert(dir, id.file, tmpl, ca, caKey); err != nil {
			return err
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	return writeKey(filepath.Join(dir, "sa.key"), key)
}

// newCert signs tmpl with the parent (self-signed when parent is nil) and writes NAME.crt/.key.
func newCert(
	dir, name string, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey,
) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(7 * 24 * time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, err
	}
	if err := writePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", der); err != nil {
		return nil, nil, err
	}
	if err := writeKey(filepath.Join(dir, name+".key"), key); err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

// writeKey writes an EC private key in SEC 1 form ("EC PRIVATE KEY"), which the Kubernetes
// components, Go's tls.LoadX509KeyPair and OpenSSL (Python's ssl) all read.
func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "EC PRIVATE KEY", der)
}

func writePEM(path, kind string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}
