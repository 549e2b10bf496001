package wire

import (
	"bytes"
	"encoding/base64"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// DenseTensorColumn is a dense float tensor as the original's Python
// client writes it into a Redis entry's Arrow record (see
// infer/testdata/fixtures/payloads/ndarray-128-base64): a 4-row struct
// {indiceData, indiceShape, data, shape} of int32 and float32 lists whose
// row i fills only field i (indiceData and indiceShape empty). For
// clients, the bench and tests; the caller releases it.
func DenseTensorColumn(data []float32, shape []int32) arrow.Array {
	i32 := arrow.ListOf(arrow.PrimitiveTypes.Int32)
	dt := arrow.StructOf(
		arrow.Field{Name: "indiceData", Type: i32, Nullable: true},
		arrow.Field{Name: "indiceShape", Type: i32, Nullable: true},
		arrow.Field{Name: "data", Type: arrow.ListOf(arrow.PrimitiveTypes.Float32), Nullable: true},
		arrow.Field{Name: "shape", Type: i32, Nullable: true},
	)
	b := array.NewStructBuilder(memory.DefaultAllocator, dt)
	defer b.Release()
	for row := range 4 {
		b.Append(true)
		for f := range 4 {
			lb := b.FieldBuilder(f).(*array.ListBuilder)
			if f != row {
				lb.AppendNull()
				continue
			}
			lb.Append(true)
			switch f {
			case 2:
				lb.ValueBuilder().(*array.Float32Builder).AppendValues(data, nil)
			case 3:
				lb.ValueBuilder().(*array.Int32Builder).AppendValues(shape, nil)
			}
		}
	}
	return b.NewArray()
}

// EncodeArrowRecord writes cols as one record batch, column i named
// names[i], in a base64 Arrow IPC stream (modern framing): the data field
// of a Redis entry as the original's Python client sends it.
func EncodeArrowRecord(names []string, cols ...arrow.Array) ([]byte, error) {
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: names[i], Type: c.DataType(), Nullable: true}
	}
	schema := arrow.NewSchema(fields, nil)
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	rec := array.NewRecordBatch(schema, cols, int64(cols[0].Len()))
	defer rec.Release()
	if err := w.Write(rec); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return []byte(base64.StdEncoding.EncodeToString(buf.Bytes())), nil
}
