package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	kubeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The fake runtime runs the OCI createRuntime hooks that a container's CDI devices bring, as
// containerd with runc does, so that a DRA driver's hook is on the path of a container's start
// here too:
//
//   - containerd resolves the CDI devices the kubelet names (CreateContainerRequest.CDIDevices)
//     against the spec files of its CDI directory and merges their container edits into the
//     container's OCI spec; a spec's own (top-level) containerEdits are applied once when any of
//     its devices is requested, a device's when that device is (cncf-tags/container-device-interface
//     SPEC.md, "containerEdits"; `hooks`: hookName, path, args, env, timeout in seconds).
//   - The OCI runtime runs createRuntime hooks when the container is created, in the runtime
//     namespace, with the container's state JSON on stdin; a hook that exits non-zero (or
//     outlives its timeout) fails the create operation (opencontainers/runtime-spec config.md,
//     "POSIX-platform Hooks"; runtime.md, "State").
//   - containerd's CRI creates the runc container (its task) in StartContainer, not in
//     CreateContainer; when that fails, StartContainer returns the error and the container is
//     left exited with code 128 and reason "StartError", the error as its message (containerd
//     internal/cri/server/container_start.go and helpers.go: errorStartExitCode,
//     errorStartReason).
//   - The state carries the annotations containerd puts on every container: the pod's UID,
//     namespace and name and the container's name and type (containerd
//     internal/cri/annotations/annotations.go, DefaultCRIAnnotations), besides the kubelet's.
//   - With --annotations=cri-o, the state carries CRI-O's instead: the sandbox's annotations
//     (the pod's own: the kubelet sends them as PodSandboxConfig.Annotations, Kubernetes
//     pkg/kubelet/kuberuntime/kuberuntime_sandbox.go and labels.go, newPodAnnotations), then
//     CRI-O's own keys, then the container's annotations, then its labels last, the kubelet's
//     io.kubernetes.pod.uid among them (CRI-O internal/factory/container/container.go,
//     SpecAddAnnotations; Kubernetes labels.go, newContainerLabels). CRI-O sets no
//     io.kubernetes.cri.* key, so a pod's annotation of that name reaches the hook.
//
// What the fake leaves out: containers never run, so the state has no pid; CDI devices no spec
// here names (the GPUs' nvidia.com/gpu=UUID) are ignored rather than refused.

// cdiHook is one entry of a CDI spec's containerEdits.hooks.
type cdiHook struct {
	HookName string   `json:"hookName"`
	Path     string   `json:"path"`
	Args     []string `json:"args"`
	Env      []string `json:"env"`
	Timeout  *int     `json:"timeout"`
}

type cdiEdits struct {
	Hooks []cdiHook `json:"hooks"`
}

type cdiSpec struct {
	Kind           string   `json:"kind"`
	ContainerEdits cdiEdits `json:"containerEdits"`
	Devices        []struct {
		Name           string   `json:"name"`
		ContainerEdits cdiEdits `json:"containerEdits"`
	} `json:"devices"`
}

// pendingStart is what StartContainer needs to run a created container's hooks.
type pendingStart struct {
	hooks []cdiHook
	state []byte
}

// createRuntimeHooks returns the createRuntime hooks the CDI devices `ids` (kind=name) bring,
// from the JSON spec files in dir, in file-name order.
func createRuntimeHooks(dir string, ids []*kubeapi.CDIDevice) ([]cdiHook, error) {
	if dir == "" || len(ids) == 0 {
		return nil, nil
	}
	wanted := map[string]bool{}
	for _, id := range ids {
		wanted[id.GetName()] = true
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var hooks []cdiHook
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		var spec cdiSpec
		if err := json.Unmarshal(data, &spec); err != nil {
			return nil, fmt.Errorf("CDI spec %s: %w", file, err)
		}
		used := false
		for _, dev := range spec.Devices {
			if wanted[spec.Kind+"="+dev.Name] {
				used = true
				hooks = append(hooks, onlyCreateRuntime(dev.ContainerEdits.Hooks)...)
			}
		}
		if used {
			hooks = append(hooks, onlyCreateRuntime(spec.ContainerEdits.Hooks)...)
		}
	}
	return hooks, nil
}

func onlyCreateRuntime(hooks []cdiHook) []cdiHook {
	var out []cdiHook
	for _, h := range hooks {
		if h.HookName == "createRuntime" {
			out = append(out, h)
		}
	}
	return out
}

// hookState is the OCI state a hook reads on stdin, with containerd's CRI annotations or
// CRI-O's (see above).
func hookState(id string, req *kubeapi.CreateContainerRequest, crio bool) ([]byte, error) {
	annotate := containerdAnnotations
	if crio {
		annotate = crioAnnotations
	}
	notes := annotate(req)
	return json.Marshal(map[string]any{
		"ociVersion": "1.2.0", "id": id, "status": "creating", "bundle": "/run/fake-cri/" + id,
		"annotations": notes,
	})
}

// containerdAnnotations are a container's annotations as containerd's CRI writes them: the
// kubelet's, then its own keys naming the pod and the container.
func containerdAnnotations(req *kubeapi.CreateContainerRequest) map[string]string {
	notes := map[string]string{}
	for k, v := range req.GetConfig().GetAnnotations() {
		notes[k] = v
	}
	meta := req.GetSandboxConfig().GetMetadata()
	notes["io.kubernetes.cri.container-type"] = "container"
	notes["io.kubernetes.cri.sandbox-id"] = req.GetPodSandboxId()
	notes["io.kubernetes.cri.sandbox-uid"] = meta.GetUid()
	notes["io.kubernetes.cri.sandbox-namespace"] = meta.GetNamespace()
	notes["io.kubernetes.cri.sandbox-name"] = meta.GetName()
	notes["io.kubernetes.cri.container-name"] = req.GetConfig().GetMetadata().GetName()
	return notes
}

// crioAnnotations are a container's annotations as CRI-O writes them, in its order: each
// later source overwrites an earlier one's key.
func crioAnnotations(req *kubeapi.CreateContainerRequest) map[string]string {
	notes := map[string]string{}
	for k, v := range req.GetSandboxConfig().GetAnnotations() {
		notes[k] = v
	}
	notes["io.kubernetes.cri-o.SandboxID"] = req.GetPodSandboxId()
	notes["io.kubernetes.cri-o.ContainerType"] = "container"
	notes["io.container.manager"] = "cri-o"
	later := []map[string]string{req.GetConfig().GetAnnotations(), req.GetConfig().GetLabels()}
	for _, from := range later {
		for k, v := range from {
			notes[k] = v
		}
	}
	return notes
}

// runHook runs one hook as an OCI runtime does: its path, its argv, only its environment, the
// state on stdin, killed past its timeout; the error carries its stderr.
func runHook(ctx context.Context, h cdiHook, state []byte) error {
	if h.Timeout != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(*h.Timeout)*time.Second)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, h.Path)
	if len(h.Args) > 0 {
		cmd.Args = h.Args
	}
	cmd.Env = h.Env
	cmd.Stdin = bytes.NewReader(state)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("error running createRuntime hook %s: %w, stderr: %s",
			h.Path, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// runPending runs a created container's hooks before it starts; on failure the container is
// left as containerd leaves it (exited, 128, StartError) and the error is StartContainer's.
func (r *recordingRuntime) runPending(ctx context.Context, id string) error {
	r.mu.Lock()
	start, ok := r.pending[id]
	delete(r.pending, id)
	r.mu.Unlock()
	if !ok {
		return nil
	}
	for _, h := range start.hooks {
		if err := runHook(ctx, h, start.state); err != nil {
			err = fmt.Errorf("failed to create containerd task: %w", err)
			svc := r.RuntimeService
			svc.Lock()
			if c, found := svc.Containers[id]; found {
				c.State = kubeapi.ContainerState_CONTAINER_EXITED
				c.StartedAt, c.FinishedAt = time.Now().UnixNano(), time.Now().UnixNano()
				c.ExitCode, c.Reason, c.Message = 128, "StartError", err.Error()
			}
			svc.Unlock()
			return err
		}
	}
	return nil
}
