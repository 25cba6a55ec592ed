package project

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FileName is the name Find looks for.
const FileName = "livesync.yaml"

// APIVersion and Kind identify the file; a later version can convert from this one.
const (
	APIVersion = "livesync.dev/v1alpha1"
	Kind       = "LiveSync"
)

// File is the whole of livesync.yaml.
type File struct {
	APIVersion string `json:"apiVersion" doc:"Always livesync.dev/v1alpha1."`
	Kind       string `json:"kind" doc:"Always LiveSync."`
	Syncs      []Sync `json:"syncs" doc:"One entry per workload to sync; kubectl livesync with no workload runs them all in one session."`
	// AllowContexts are the contexts a run without a terminal may change workloads on (see
	// pkg/guard): each by its name and its API server, so a committed file allows a cluster,
	// never whatever a reader's kubeconfig calls by that name.
	AllowContexts []AllowContext `json:"allowContexts,omitempty" doc:"Contexts that runs without a terminal (coding agents, scripts, CI) may change workloads on (refresh, pull-policy, restore, a sync's --refresh, --pull-policy, --follow-tag, --restart process) although their API server is not local. Each names the context and the API server it must point at."`

	// path is where the file was read from: relative LOCAL paths are relative to its directory.
	path string
}

// AllowContext is one context of allowContexts.
type AllowContext struct {
	Context string `json:"context" doc:"The kubeconfig context's name."`
	Server  string `json:"server" doc:"The API server URL it must point at, as the kubeconfig has it: a context of that name pointing elsewhere is not allowed."`
}

// Sync is one entry: what one command line takes today.
type Sync struct {
	Name       string   `json:"name" doc:"Names the entry: prefixes its output, and kubectl livesync NAME runs just this entry. A DNS label."`
	Workload   string   `json:"workload,omitempty" doc:"TYPE/NAME as kubectl takes it, e.g. deploy/api or pod/web-0. Exactly one of workload and selector."`
	Selector   string   `json:"selector,omitempty" doc:"A label selector (kubectl -l) choosing the pods to sync into."`
	Namespace  string   `json:"namespace,omitempty" doc:"The namespace; default: the kubeconfig context's (or -n)."`
	Containers []string `json:"containers,omitempty" doc:"Containers to sync into (kubectl -c); default: the kubectl.kubernetes.io/default-container annotation, else the first."`
	Mappings   []string `json:"mappings" doc:"LOCAL:REMOTE pairs; a relative LOCAL is relative to this file's directory (one that resolves outside it needs --trust-file), REMOTE is absolute in the container."`
	Exclude    []string `json:"exclude,omitempty" doc:"gitignore-style patterns never synced, beside .livesyncignore."`
	GitIgnore  bool     `json:"gitignore,omitempty" doc:"Also honour .gitignore files."`
	SyncBack   []string `json:"syncBack,omitempty" doc:"gitignore-style patterns, relative to each LOCAL, of files the container writes that come home (from the oldest pod, never over a local edit); none may be absolute or use ..."`
	Initial    string   `json:"initial,omitempty" doc:"Initial sync of each new container: upload (default), mirror or none." enum:"upload,mirror,none"`
	OnSync     string   `json:"onSync,omitempty" doc:"Run sh -c CMD in each container after each applied batch; $LIVESYNC_CHANGED lists the changed remote paths. Named in a note when the run starts."`
	// OnSyncTimeout bounds an OnSync run; zero means the command line's --on-sync-timeout.
	OnSyncTimeout *metav1.Duration `json:"onSyncTimeout,omitempty" doc:"Close an onSync command's exec after this long, e.g. 30s."`
	PullPolicy    string           `json:"pullPolicy,omitempty" doc:"Set this imagePullPolicy on the workload first." enum:"Always,IfNotPresent,Never"`
	Refresh       bool             `json:"refresh,omitempty" doc:"Pin a moved tag to its new digest first."`
	// Restart is --restart: none, process or signal:SIG.
	Restart   string `json:"restart,omitempty" doc:"Restart the app after each batch that changed something: none (default), signal:SIG (send SIG, e.g. signal:HUP, to the container's main process) or process (roll out once with livesync's supervisor as the container's command, which restarts the process in place; kubectl livesync restore takes it out)."`
	FollowTag bool   `json:"followTag,omitempty" doc:"While syncing, poll the registry and pin each new push of the tag."`
	// Interval is the registry polling interval with FollowTag; zero means --interval.
	Interval *metav1.Duration `json:"interval,omitempty" doc:"Registry polling interval with followTag, e.g. 30s."`
	Helper   string           `json:"helper,omitempty" doc:"Sync through an ephemeral helper container: auto (default: only where the container has no sh or tar), ephemeral (always; needs --helper ephemeral or --trust-file) or never." enum:"auto,ephemeral,never"`
	// HelperImage is the helper container's image; empty means --helper-image.
	HelperImage string `json:"helperImage,omitempty" doc:"Image of the helper container; needs sh, tar and dd. Needs --helper-image or --trust-file."`
	// Forward are --forward specs, [ADDRESS:]LOCAL:REMOTE.
	Forward []string `json:"forward,omitempty" doc:"Ports kept forwarded to the workload's Ready, synced pods for the whole session, [ADDRESS:]LOCAL:REMOTE as --forward takes them, e.g. 8080:http. An ADDRESS other than loopback needs --trust-file or --forward."`
	Logs    bool     `json:"logs,omitempty" doc:"Show the synced containers' output, each line prefixed pod/container (--logs)."`
}
