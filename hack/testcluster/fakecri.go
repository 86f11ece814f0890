package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	kubeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/fake"
	"k8s.io/cri-client/pkg/util"
)

// exitEnv, set in a container's environment, makes the fake runtime report the container as
// exited with that code as soon as it starts (containers never run here; init containers must
// finish for a pod's app containers to be created).
const exitEnv = "FAKE_CRI_EXIT_CODE"

// recordingRuntime is Kubernetes' in-memory CRI runtime (k8s.io/cri-client/pkg/fake, the one
// kubemark's hollow node uses) with three additions: every CreateContainer request is written to
// a JSON file, so tests can read the environment, devices and mounts the kubelet asked for;
// containers with FAKE_CRI_EXIT_CODE in their environment exit once started; and, given a CDI
// directory, the createRuntime hooks of a container's CDI devices run when it starts, as with
// containerd and runc (fakecri_hooks.go).
type recordingRuntime struct {
	*fake.RemoteRuntime
	dir     string
	cdiDir  string // CDI spec directory whose createRuntime hooks run (fakecri_hooks.go); "" none
	crio    bool   // the hooks' state carries CRI-O's annotations, not containerd's
	mu      sync.Mutex
	exits   map[string]int32        // container ID -> exit code
	pending map[string]pendingStart // container ID -> hooks to run when it starts
}

// containerRecord is what a test reads back for one container.
type containerRecord struct {
	Namespace   string            `json:"namespace"`
	Pod         string            `json:"pod"`
	PodUID      string            `json:"podUID"`
	Container   string            `json:"container"`
	Attempt     uint32            `json:"attempt"`
	Envs        map[string]string `json:"envs"`
	Devices     []*kubeapi.Device `json:"devices"`
	Mounts      []*kubeapi.Mount  `json:"mounts"`
	Annotations map[string]string `json:"annotations"`
	// CDI devices the kubelet asks the runtime to apply (DRA drivers' claims).
	CDIDevices []*kubeapi.CDIDevice `json:"cdiDevices"`
}

func (r *recordingRuntime) CreateContainer(
	ctx context.Context, req *kubeapi.CreateContainerRequest,
) (*kubeapi.CreateContainerResponse, error) {
	resp, err := r.RemoteRuntime.CreateContainer(ctx, req)
	if err != nil {
		return resp, err
	}
	rec := containerRecord{Envs: map[string]string{}}
	if meta := req.GetSandboxConfig().GetMetadata(); meta != nil {
		rec.Namespace, rec.Pod, rec.PodUID = meta.Namespace, meta.Name, meta.Uid
	}
	cfg := req.GetConfig()
	rec.Container = cfg.GetMetadata().GetName()
	rec.Attempt = cfg.GetMetadata().GetAttempt()
	for _, kv := range cfg.GetEnvs() {
		rec.Envs[kv.Key] = string(kv.Value)
	}
	rec.Devices, rec.Mounts, rec.Annotations = cfg.GetDevices(), cfg.GetMounts(), cfg.GetAnnotations()
	rec.CDIDevices = cfg.GetCDIDevices()
	hooks, herr := createRuntimeHooks(r.cdiDir, rec.CDIDevices)
	if herr != nil {
		return nil, herr
	}
	if len(hooks) > 0 {
		state, serr := hookState(resp.ContainerId, req, r.crio)
		if serr != nil {
			return nil, serr
		}
		r.mu.Lock()
		r.pending[resp.ContainerId] = pendingStart{hooks, state}
		r.mu.Unlock()
	}
	if code, ok := rec.Envs[exitEnv]; ok {
		n, perr := strconv.Atoi(code)
		if perr == nil {
			r.mu.Lock()
			r.exits[resp.ContainerId] = int32(n)
			r.mu.Unlock()
		}
	}
	name := fmt.Sprintf("%s_%s_%s_%d.json", rec.Namespace, rec.Pod, rec.Container, rec.Attempt)
	if werr := writeJSON(filepath.Join(r.dir, name), rec); werr != nil {
		fmt.Fprintln(os.Stderr, "fake-cri: record:", werr)
	}
	return resp, nil
}

func (r *recordingRuntime) StartContainer(
	ctx context.Context, req *kubeapi.StartContainerRequest,
) (*kubeapi.StartContainerResponse, error) {
	if err := r.runPending(ctx, req.ContainerId); err != nil {
		return nil, err
	}
	resp, err := r.RemoteRuntime.StartContainer(ctx, req)
	if err != nil {
		return resp, err
	}
	r.mu.Lock()
	code, ok := r.exits[req.ContainerId]
	r.mu.Unlock()
	if ok {
		svc := r.RuntimeService
		svc.Lock()
		if c, found := svc.Containers[req.ContainerId]; found {
			c.State = kubeapi.ContainerState_CONTAINER_EXITED
			c.FinishedAt = time.Now().UnixNano()
			c.ExitCode = code
			c.Reason = "Completed"
		}
		svc.Unlock()
	}
	return resp, nil
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// runFakeCRI serves the recording fake runtime on a unix socket until SIGTERM or SIGINT.
func runFakeCRI(args []string) int {
	fs := flag.NewFlagSet("fake-cri", flag.ContinueOnError)
	endpoint := fs.String("endpoint", "", "unix:///path/to/cri.sock (required)")
	dir := fs.String("record-dir", "", "directory for one JSON file per created container (required)")
	cdiDir := fs.String("cdi-dir", "", "CDI spec directory: run the createRuntime hooks of a container's CDI devices when it starts")
	annotations := fs.String("annotations", "containerd", "whose annotations the hooks' state carries: containerd or cri-o")
	if err := fs.Parse(args); err != nil || *endpoint == "" || *dir == "" {
		fmt.Fprintln(os.Stderr, "fake-cri: --endpoint and --record-dir are required")
		return 2
	}
	if *annotations != "containerd" && *annotations != "cri-o" {
		fmt.Fprintln(os.Stderr, "fake-cri: --annotations must be containerd or cri-o, not", *annotations)
		return 2
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "fake-cri:", err)
		return 1
	}
	rt := &recordingRuntime{
		RemoteRuntime: fake.NewFakeRemoteRuntime(), dir: *dir, cdiDir: *cdiDir, crio: *annotations == "cri-o",
		exits: map[string]int32{}, pending: map[string]pendingStart{},
	}
	// Any image "pulls" instantly; a size of zero would make the kubelet reject it.
	rt.ImageService.SetFakeImageSize(1 << 20)
	rt.RuntimeService.FakeStatus = &kubeapi.RuntimeStatus{Conditions: []*kubeapi.RuntimeCondition{
		{Type: kubeapi.RuntimeReady, Status: true},
		{Type: kubeapi.NetworkReady, Status: true},
	}}
	server := grpc.NewServer()
	kubeapi.RegisterRuntimeServiceServer(server, rt)
	kubeapi.RegisterImageServiceServer(server, rt.RemoteRuntime)
	listener, err := util.CreateListener(*endpoint)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake-cri:", err)
		return 1
	}
	go func() { _ = server.Serve(listener) }()
	fmt.Println("fake-cri serving on", *endpoint)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	server.Stop()
	return 0
}
