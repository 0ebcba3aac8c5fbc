package main

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
)

type controlPlane struct {
	etcd          *embed.Etcd
	server        string
	kubeconfig    string
	apiserverPort int
	etcdPort      int
	apiserverDone chan error
	kcm           *exec.Cmd
}

func startControlPlane(o options) (*controlPlane, error) {
	if err := choosePorts(&o.apiserverPort, &o.etcdPort, &o.etcdPeerPort); err != nil {
		return nil, err
	}
	creds, err := ensurePKI(o.dataDir)
	if err != nil {
		return nil, fmt.Errorf("creating credentials: %w", err)
	}
	token, err := adminToken(o.dataDir)
	if err != nil {
		return nil, err
	}
	tokenFile := filepath.Join(o.dataDir, "tokens.csv")
	line := fmt.Sprintf("%s,concord-admin,concord-admin,\"system:masters\"\n", token)
	if err := os.WriteFile(tokenFile, []byte(line), 0o600); err != nil {
		return nil, err
	}

	etcd, err := startEtcd(o.dataDir, o.etcdPort, o.etcdPeerPort)
	if err != nil {
		return nil, err
	}
	cp := &controlPlane{
		etcd:          etcd,
		server:        fmt.Sprintf("https://127.0.0.1:%d", o.apiserverPort),
		apiserverPort: o.apiserverPort,
		etcdPort:      o.etcdPort,
		apiserverDone: make(chan error, 1),
	}
	args := []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", o.apiserverPort),
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", o.etcdPort),
		"--cert-dir=" + filepath.Join(o.dataDir, "certs"),
		"--tls-cert-file=" + creds.servingCert,
		"--tls-private-key-file=" + creds.servingKey,
		"--client-ca-file=" + creds.caCert,
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + creds.saPub,
		"--service-account-signing-key-file=" + creds.saKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		// 127.0.0.1 is not a valid Endpoints address for the kubernetes service.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
	}
	args = append(args, o.extraAPIServer...)
	cmd := apiserver.NewAPIServerCommand()
	cmd.SetArgs(args)
	go func() { cp.apiserverDone <- cmd.Execute() }()

	if err := waitReady(cp, creds.caCert, token, o.readyTimeout); err != nil {
		etcd.Close()
		return nil, err
	}
	cp.kubeconfig = filepath.Join(o.dataDir, "kubeconfig")
	if err := writeKubeconfig(cp.kubeconfig, cp.server, creds.caCert, token); err != nil {
		etcd.Close()
		return nil, err
	}
	if o.controllerMgr {
		if err := cp.startControllerManager(o.dataDir, creds); err != nil {
			etcd.Close()
			return nil, err
		}
	}
	return cp, nil
}

func adminToken(dir string) (string, error) {
	path := filepath.Join(dir, "admin.token")
	if raw, err := os.ReadFile(path); err == nil && len(raw) > 0 {
		return string(raw), nil
	}
	buf := make([]byte, 24)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	token := hex.EncodeToString(buf)
	return token, os.WriteFile(path, []byte(token), 0o600)
}

func waitReady(cp *controlPlane, caFile, token string, timeout time.Duration) error {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	deadline := time.Now().Add(timeout)
	last := "no answer"
	for time.Now().Before(deadline) {
		select {
		case err := <-cp.apiserverDone:
			return fmt.Errorf("kube-apiserver exited before it was ready: %v", err)
		default:
		}
		req, _ := http.NewRequest(http.MethodGet, cp.server+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("kube-apiserver was not ready within %s (last answer: %s)", timeout, last)
}

func writeKubeconfig(path, server, caFile, token string) error {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	doc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: concord-test
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: concord-admin
  user:
    token: %s
contexts:
- name: concord-test
  context:
    cluster: concord-test
    user: concord-admin
current-context: concord-test
`, server, base64.StdEncoding.EncodeToString(caPEM), token)
	return os.WriteFile(path, []byte(doc), 0o600)
}

func (cp *controlPlane) startControllerManager(dir string, creds pki) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logFile, err := os.OpenFile(filepath.Join(dir, "controller-manager.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "controller-manager",
		"--kubeconfig="+cp.kubeconfig,
		"--controllers=garbage-collector-controller,namespace-controller,serviceaccount-controller,serviceaccount-token-controller",
		"--service-account-private-key-file="+creds.saKey,
		"--root-ca-file="+creds.caCert,
		"--use-service-account-credentials=false",
		"--leader-elect=false",
		"--secure-port=0",
		"--concurrent-gc-syncs=5",
		"--concurrent-namespace-syncs=5",
	)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// If this process dies without a chance to clean up, the kernel kills
	// the controller manager too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	cp.kcm = cmd
	go func() { _ = cmd.Wait() }()
	return nil
}

func (cp *controlPlane) stopControllerManager() {
	if cp.kcm != nil && cp.kcm.Process != nil {
		_ = cp.kcm.Process.Kill()
	}
}
