package plan

import (
	"encoding/json"

	"github.com/tileflight/tileflight/tdbarray"
	"strconv"

	"github.com/tileflight/tileflight/format/datatype"
)

func schemaFloat64() datatype.Datatype { return datatype.Float64 }

func jsonNum(f float64) json.Number { return json.Number(strconv.FormatFloat(f, 'g', -1, 64)) }

type arrayRef struct{ a *tdbarray.Array }
