package mesh

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// A job's work queue and its results are each split into partitions: P
// replicated streams, each with its own subject (and, for work, its own
// workers consumer). Partition 0 keeps the names a job had before
// partitions existed, so that running deployments keep working; the names
// of partition p > 0 add PartitionSep and p after "SERVING_<job>". Job
// names cannot hold PartitionSep, so the job is what lies between
// StreamPrefix and the first PartitionSep, and no name of a partition
// p > 0 can equal a name of another job.
//
//	work       p=0  SERVING_<job>            serving.<job>.work
//	work       p>0  SERVING_<job>~<p>        serving.<job>.work.<p>
//	results    p=0  SERVING_<job>_RESULTS    serving.<job>.results.<door>
//	results    p>0  SERVING_<job>~<p>_RESULTS serving.<job>.results-<p>.<door>
const (
	// PartitionSep separates a job from its partition number in stream names.
	PartitionSep = "~"
	// DefaultPartitions is the number of partitions of a replicated job
	// (Replicas > 1); an unreplicated job has one.
	DefaultPartitions = 3
	// MaxPartitions bounds StreamConfig.Partitions.
	MaxPartitions = 16
	// MaxLevels bounds StreamConfig.Levels (Triton's priority_levels):
	// each level is a consumer per partition.
	MaxLevels = 16
)

// PartitionStreamName is the work-queue stream of partition p of job.
func PartitionStreamName(job string, p int) string {
	if p == 0 {
		return StreamName(job)
	}
	return StreamName(job) + PartitionSep + strconv.Itoa(p)
}

// PartitionSubject is the subject of partition p of job's work queue.
func PartitionSubject(job string, p int) string {
	if p == 0 {
		return WorkSubject(job)
	}
	return WorkSubject(job) + "." + strconv.Itoa(p)
}

// workSubjects are the subjects of job's n work partitions, in order.
func workSubjects(job string, n int) []string {
	subjects := make([]string, n)
	for p := range n {
		subjects[p] = PartitionSubject(job, p)
	}
	return subjects
}

// ResultsPartitionStreamName is the results stream of partition p of job.
func ResultsPartitionStreamName(job string, p int) string {
	if p == 0 {
		return ResultsStreamName(job)
	}
	return StreamName(job) + PartitionSep + strconv.Itoa(p) + ResultsStreamSuffix
}

// ResultsPartitionSubject maps subject, which lies under job's results
// (ResultsSubject(job, door), or ">" for all), onto results partition p.
// Doors and Cs-Result-To name partition 0's subject; the worker and the
// results consumers map it.
func ResultsPartitionSubject(job string, p int, subject string) string {
	if p == 0 {
		return subject
	}
	rest, _ := strings.CutPrefix(subject, ResultsSubject(job, ""))
	return SubjectPrefix + "." + job + ".results-" + strconv.Itoa(p) + "." + rest
}

// partitionOf returns the partition a stream name of job belongs to, and
// false when it is none of job's work streams.
func partitionOf(job, stream string) (int, bool) {
	if stream == StreamName(job) {
		return 0, true
	}
	n, ok := strings.CutPrefix(stream, StreamName(job)+PartitionSep)
	if !ok {
		return 0, false
	}
	p, err := strconv.Atoi(n)
	if err != nil || p <= 0 || strconv.Itoa(p) != n {
		return 0, false
	}
	return p, true
}

// Partitions returns how many work partitions job has on the server: one
// more than the highest partition found, at least 1 when partition 0 is
// the only one. Doors and workers ask it at start, so that they use the
// partitions EnsureStreams made whatever their own config says; it is
// answered by the JetStream meta leader, not by a stream leader. It
// returns 0 and the error when the server cannot list streams.
func Partitions(ctx context.Context, js jetstream.JetStream, job string) (int, error) {
	if err := ValidateJob(job); err != nil {
		return 0, err
	}
	names := js.StreamNames(ctx, jetstream.WithStreamListSubject(WorkSubject(job)+".*"))
	n := 1
	for name := range names.Name() {
		if p, ok := partitionOf(job, name); ok {
			n = max(n, p+1)
		}
	}
	if err := names.Err(); err != nil {
		return 0, fmt.Errorf("mesh: list partitions of %s: %w", job, err)
	}
	return n, nil
}

// firstPartition is where a publish of msgID starts among n partitions:
// the same partition for the same id, so that JetStream's Msg-Id dedupe
// (which is per stream) catches a second copy in the common case.
func firstPartition(msgID string, n int) int {
	// FNV-1a: stable across processes and versions, unlike hash/maphash.
	h := uint32(2166136261)
	for i := 0; i < len(msgID); i++ {
		h ^= uint32(msgID[i])
		h *= 16777619
	}
	return int(h % uint32(n))
}
