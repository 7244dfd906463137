# Reads each Parquet part given as an argument with Spark and with pyarrow and checks
# that Spark reads the whole file and every value exactly: each value is brought to an
# exact, comparable form on both sides (instants and dates as integers, decimals as
# decimals, bytes as hex, lists element by element) and the rows must be equal.
# Prints `spark <column> <spark type>` for every column of every part, then
# `spark ok <rows>` per part. Exits non-zero, naming the part and column, otherwise.
import decimal
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F


def spark_form(col: Column, t: pa.DataType) -> Column:
    """The Spark expression giving `col` (of Arrow type `t`) its comparable form."""
    if pa.types.is_timestamp(t):
        return F.unix_micros(col if t.tz else col.cast("timestamp"))
    if pa.types.is_date32(t):
        return F.unix_date(col)
    if pa.types.is_decimal(t) or pa.types.is_uint64(t):
        return col.cast("string")
    if pa.types.is_binary(t):
        return F.hex(col)
    if pa.types.is_list(t):
        return F.transform(col, lambda x: spark_form(x, t.value_type))
    return col


def arrow_form(values: pa.Array, t: pa.DataType) -> list:
    """The same comparable form of an Arrow column, as Python values."""
    if pa.types.is_timestamp(t):
        return pc.cast(values, pa.int64()).to_pylist()
    if pa.types.is_date32(t):
        return pc.cast(values, pa.int32()).to_pylist()
    if pa.types.is_decimal(t) or pa.types.is_uint64(t):
        return [None if v is None else decimal.Decimal(v) for v in values.to_pylist()]
    if pa.types.is_binary(t):
        return [None if v is None else v.hex().upper() for v in values.to_pylist()]
    if pa.types.is_list(t):
        flat = arrow_form(values.values, t.value_type)
        out, offsets = [], values.offsets.to_pylist()
        for i, valid in enumerate(values.is_valid().to_pylist()):
            out.append(flat[offsets[i]:offsets[i + 1]] if valid else None)
        return out
    if isinstance(t, pa.ExtensionType):
        return values.storage.to_pylist()
    return values.to_pylist()


def spark_value(v, t: pa.DataType):
    """A Spark row value in the form `arrow_form` gives."""
    if v is None:
        return None
    if pa.types.is_decimal(t) or pa.types.is_uint64(t):
        return decimal.Decimal(v)
    if pa.types.is_list(t):
        return [spark_value(x, t.value_type) for x in v]
    return v


def comparable(v):
    """NaN equals NaN for the comparison; everything else as it is."""
    if isinstance(v, float) and v != v:
        return "NaN"
    if isinstance(v, list):
        return [comparable(x) for x in v]
    return v


def main() -> int:
    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    failed = 0
    for path in sys.argv[1:]:
        table = pq.read_table(path)
        frame = spark.read.parquet(path)
        for field in frame.schema.fields:
            print(f"spark {field.name} {field.dataType.simpleString()}")
        names = table.schema.names
        types = [table.schema.field(n).type for n in names]
        rows = frame.select(*[spark_form(F.col(f"`{n}`"), t).alias(n) for n, t in zip(names, types)]).collect()
        got = sorted(
            (repr([comparable(spark_value(r[i], t)) for i, t in enumerate(types)]) for r in rows)
        )
        columns = [arrow_form(table.column(n).combine_chunks(), t) for n, t in zip(names, types)]
        want = sorted(repr([comparable(c[i]) for c in columns]) for i in range(table.num_rows))
        if got != want:
            failed += 1
            for g, w in zip(got, want):
                if g != w:
                    print(f"spark MISMATCH {path}\n  spark:   {g}\n  pyarrow: {w}", file=sys.stderr)
                    break
            else:
                print(f"spark MISMATCH {path}: {len(got)} rows, pyarrow {len(want)}", file=sys.stderr)
        else:
            print(f"spark ok {table.num_rows}")
    spark.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
