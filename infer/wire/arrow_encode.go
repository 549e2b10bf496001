package wire

import (
	"bytes"
	"encoding/base64"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cluster-serving/cluster-serving/infer"
)

// redisResultSchema is the schema of every result batch: flat data and
// shape columns, as the original's Python OutputQueue reads them.
var redisResultSchema = arrow.NewSchema([]arrow.Field{
	{Name: "data", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	{Name: "shape", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
}, nil)

// EncodeRedisArrow renders one record's outputs as the value of the Redis
// result hash: base64 of an Arrow IPC stream (modern framing) with one
// record batch per output tensor, in output order. Each batch has columns
// data (float32; other dtypes are converted) and shape (int32): its rows
// number max(len(data), rank); shape holds the dims in its first rows and
// null after, data is null past its values. Errors are not *InputError:
// only a dim beyond int32 or a broken tensor makes one. Safe for concurrent
// use.
func EncodeRedisArrow(outputs []infer.Tensor) ([]byte, error) {
	var buf bytes.Buffer
	mem := memory.DefaultAllocator
	w := ipc.NewWriter(&buf, ipc.WithSchema(redisResultSchema), ipc.WithAllocator(mem))
	for i, t := range outputs {
		if err := writeResultBatch(w, mem, t); err != nil {
			_ = w.Close()
			return nil, fmt.Errorf("output %d: %w", i, err)
		}
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("arrow stream: %w", err)
	}
	out := make([]byte, base64.StdEncoding.EncodedLen(buf.Len()))
	base64.StdEncoding.Encode(out, buf.Bytes())
	return out, nil
}

func writeResultBatch(w *ipc.Writer, mem memory.Allocator, t infer.Tensor) error {
	if err := t.Check(); err != nil {
		return err
	}
	vals, err := infer.Float64s(t)
	if err != nil {
		return err
	}
	rows := max(len(vals), len(t.Shape))
	data := array.NewFloat32Builder(mem)
	defer data.Release()
	shape := array.NewInt32Builder(mem)
	defer shape.Release()
	data.Reserve(rows)
	shape.Reserve(rows)
	for _, v := range vals {
		data.Append(float32(v))
	}
	data.AppendNulls(rows - len(vals))
	for _, d := range t.Shape {
		if d > 1<<31-1 {
			return fmt.Errorf("dim %d does not fit int32", d)
		}
		shape.Append(int32(d))
	}
	shape.AppendNulls(rows - len(t.Shape))
	dataArr, shapeArr := data.NewArray(), shape.NewArray()
	defer dataArr.Release()
	defer shapeArr.Release()
	rec := array.NewRecordBatch(redisResultSchema, []arrow.Array{dataArr, shapeArr}, int64(rows))
	defer rec.Release()
	return w.Write(rec)
}
