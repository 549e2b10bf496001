package mesh

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

// ProcessServiceName is the micro service every serving process
// registers (start, worker, and the door commands), so that the status
// page and `cluster-serving status` find what no worker knows: the doors
// each process serves with their counts (telemetry.Tally), its last
// errors, and the models it knows with their state. Its stats endpoint
// data is the process's ProcessStats.
const ProcessServiceName = "cluster-serving-process"

// ProcessStatusSubject is the subject of the processes' status endpoint
// (a request reaches one of them; $SRV.STATS.cluster-serving-process
// hears from all).
const ProcessStatusSubject = SubjectPrefix + ".processes.status"

// ModelState is one model a process knows, as the repository extension
// answers it: state READY, UNAVAILABLE, LOADING or UNLOADING, and why a
// model does not serve (or a newer version failed).
type ModelState struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
}

// ProcessStats is what one process tells about itself.
type ProcessStats struct {
	Doors  []telemetry.DoorTally   `json:"doors,omitempty"`
	Errors []telemetry.ErrorRecord `json:"errors,omitempty"`
	Models []ModelState            `json:"models,omitempty"`
}

// ProcessConfig says what RegisterProcess publishes.
type ProcessConfig struct {
	// Name and Version name the process ("cluster-serving start job")
	// and its release.
	Name, Version string
	// Tally is the process's account of its doors (nil: none).
	Tally *telemetry.Tally
	// Models lists the models the process serves or holds in its
	// repository, with their state; nil: none.
	Models func() []ModelState
}

// RegisterProcess adds the process's micro service (ProcessServiceName)
// on nc until stop is called.
func RegisterProcess(nc *nats.Conn, cfg ProcessConfig) (stop func(), err error) {
	stats := func() ProcessStats {
		var s ProcessStats
		s.Doors, s.Errors = cfg.Tally.Snapshot()
		if cfg.Models != nil {
			s.Models = cfg.Models()
		}
		return s
	}
	svc, err := micro.AddService(nc, micro.Config{
		Name:         ProcessServiceName,
		Version:      cmp.Or(cfg.Version, "0.0.0"),
		Description:  "cluster-serving process: its doors, last errors and models",
		Metadata:     processMetadata(map[string]string{"name": cfg.Name}),
		StatsHandler: func(*micro.Endpoint) any { return stats() },
	})
	if err != nil {
		return nil, fmt.Errorf("mesh: register process service: %w", err)
	}
	if err := svc.AddEndpoint("status", micro.HandlerFunc(func(r micro.Request) {
		_ = r.RespondJSON(stats())
	}), micro.WithEndpointSubject(ProcessStatusSubject)); err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("mesh: register process status endpoint: %w", err)
	}
	return func() { _ = svc.Stop() }, nil
}

// processMetadata adds to md, a micro service's metadata, the host name
// and pid of this process, which name the process a service runs in.
func processMetadata(md map[string]string) map[string]string {
	md["host"], _ = os.Hostname()
	md["pid"] = strconv.Itoa(os.Getpid())
	return md
}

// ProcessInfo is one process found on the mesh.
type ProcessInfo struct {
	ID, Name, Host, PID string
	Started             time.Time
	Stats               ProcessStats
}

// DiscoverProcesses asks every process on the mesh for its stats and
// returns the answers that arrive within wait, sorted by host and pid.
func DiscoverProcesses(ctx context.Context, nc *nats.Conn, wait time.Duration) ([]ProcessInfo, error) {
	var out []ProcessInfo
	err := gather(ctx, nc, ProcessServiceName, wait, 0, func(st micro.Stats) {
		p := ProcessInfo{ID: st.ID, Name: st.Metadata["name"], Host: st.Metadata["host"], PID: st.Metadata["pid"], Started: st.Started}
		for _, e := range st.Endpoints {
			if len(e.Data) > 0 {
				_ = json.Unmarshal(e.Data, &p.Stats)
			}
		}
		out = append(out, p)
	})
	slices.SortFunc(out, func(a, b ProcessInfo) int {
		return cmp.Or(cmp.Compare(a.Host, b.Host), cmp.Compare(a.PID, b.PID), cmp.Compare(a.ID, b.ID))
	})
	return out, err
}
