package reliability_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// pki is a throwaway CA with one server and one client certificate, made
// for one test: nothing is committed, nothing outlives the test.
type pki struct {
	ca, serverCert, serverKey, clientCert, clientKey string // PEM files
	clientKeyPEM                                     string // for the secret scan
}

func newPKI(t testing.TB, dir string) pki {
	t.Helper()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "rolecall test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, server bool) ([]byte, *ecdsa.PrivateKey) {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		if server {
			tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
			tmpl.DNSNames = []string{"localhost"}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	srvDER, srvKey := leaf(2, "rolecall test server", x509.ExtKeyUsageServerAuth, true)
	cliDER, cliKey := leaf(3, "rolecall-worker", x509.ExtKeyUsageClientAuth, false)
	p := pki{
		ca:         filepath.Join(dir, "ca.pem"),
		serverCert: filepath.Join(dir, "server.pem"),
		serverKey:  filepath.Join(dir, "server-key.pem"),
		clientCert: filepath.Join(dir, "client.pem"),
		clientKey:  filepath.Join(dir, "client-key.pem"),
	}
	writeFile(t, p.ca, pemBlock("CERTIFICATE", caDER))
	writeFile(t, p.serverCert, pemBlock("CERTIFICATE", srvDER))
	writeFile(t, p.serverKey, keyPEM(t, srvKey))
	writeFile(t, p.clientCert, pemBlock("CERTIFICATE", cliDER))
	p.clientKeyPEM = keyPEM(t, cliKey)
	writeFile(t, p.clientKey, p.clientKeyPEM)
	return p
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func pemBlock(typ string, der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
}

func keyPEM(t testing.TB, k *ecdsa.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pemBlock("EC PRIVATE KEY", der)
}

// operatorSetup is a decentralized-auth (operator mode) setup: an
// operator, a system account, one application account with JetStream,
// and user credentials signed by that account.
type operatorSetup struct {
	serverConf string // the nats-server configuration lines
	account    nkeys.KeyPair
	accountPub string
}

func newOperator(t testing.TB, dir string) operatorSetup {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	okp, err := nkeys.CreateOperator()
	must(err)
	opub, err := okp.PublicKey()
	must(err)
	account := func(name string, js bool) (nkeys.KeyPair, string, string) {
		kp, err := nkeys.CreateAccount()
		must(err)
		pub, err := kp.PublicKey()
		must(err)
		ac := jwt.NewAccountClaims(pub)
		ac.Name = name
		if js {
			ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
		}
		tok, err := ac.Encode(okp)
		must(err)
		return kp, pub, tok
	}
	_, sysPub, sysJWT := account("SYS", false)
	akp, appPub, appJWT := account("APP", true)
	oc := jwt.NewOperatorClaims(opub)
	oc.Name = "rolecall-test"
	oc.SystemAccount = sysPub
	opJWT, err := oc.Encode(okp)
	must(err)
	opFile := filepath.Join(dir, "operator.jwt")
	writeFile(t, opFile, opJWT)
	conf := "operator: " + quote(opFile) + "\n" +
		"system_account: " + sysPub + "\n" +
		"resolver: MEMORY\n" +
		"resolver_preload: {\n  " + sysPub + ": " + quote(sysJWT) + "\n  " + appPub + ": " + quote(appJWT) + "\n}\n"
	return operatorSetup{serverConf: conf, account: akp, accountPub: appPub}
}

// userCreds writes a .creds file (user JWT + nkey seed) for a new user of
// the application account and returns its path and its seed.
func (o operatorSetup) userCreds(t testing.TB, dir, name string) (path, seed string) {
	t.Helper()
	ukp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	upub, _ := ukp.PublicKey()
	uc := jwt.NewUserClaims(upub)
	uc.Name = name
	tok, err := uc.Encode(o.account)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := ukp.Seed()
	creds, err := jwt.FormatUserConfig(tok, s)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, name+".creds")
	writeFile(t, path, string(creds))
	return path, string(s)
}

// userNKey writes a user nkey seed file and returns its path, public key
// and seed.
func userNKey(t testing.TB, dir, name string) (path, pub, seed string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ = kp.PublicKey()
	s, _ := kp.Seed()
	path = filepath.Join(dir, name+".nk")
	writeFile(t, path, string(s)+"\n")
	return path, pub, string(s)
}

func quote(s string) string { return `"` + s + `"` }
