package modelconfig

import (
	"fmt"
	"slices"

	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// Versions picks, in ascending order, which of the versions on disk serve
// under cfg's version_policy: latest{num_versions: N} the N highest
// (default and N = 0: 1), all{} every one, specific{versions: [...]} those
// listed, where one not on disk is an error wrapping ErrInvalid. A nil
// cfg or policy is latest 1.
func Versions(cfg *kservepb.ModelConfig, onDisk []int64) ([]int64, error) {
	disk := slices.Clone(onDisk)
	slices.Sort(disk)
	disk = slices.Compact(disk)
	switch p := cfg.GetVersionPolicy().GetPolicyChoice().(type) {
	case *kservepb.ModelVersionPolicy_All_:
		return disk, nil
	case *kservepb.ModelVersionPolicy_Specific_:
		want := slices.Clone(p.Specific.GetVersions())
		slices.Sort(want)
		want = slices.Compact(want)
		for _, v := range want {
			if _, found := slices.BinarySearch(disk, v); !found {
				return nil, fmt.Errorf("%w: version_policy specific: version %d of model %q is not on disk (versions on disk: %v)", ErrInvalid, v, cfg.GetName(), disk)
			}
		}
		return want, nil
	}
	n := max(int(cfg.GetVersionPolicy().GetLatest().GetNumVersions()), 1)
	return disk[max(len(disk)-n, 0):], nil
}
