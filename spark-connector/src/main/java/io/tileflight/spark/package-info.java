/**
 * A Spark DataSource V2 connector for tileflight (format {@code "tileflight-jvm"}).
 *
 * <p>{@code spark.read.format("tileflight-jvm").option("uri", ...).option("array", ...).load()}
 * reads an array through the daemon's Arrow Flight service: one Spark partition per Flight
 * endpoint of GetFlightInfo (with the endpoint's locations as preferred hosts), Arrow record
 * batches handed to Spark as columnar batches without row conversion. Column pruning, filters
 * (dimension ranges become the query's {@code subarray}, exact attribute conditions its
 * {@code filter}), aggregates without GROUP BY (the query's {@code aggregates}, which the
 * daemon answers from tile statistics where it can) and LIMIT are pushed into the query.
 * The options are those of the Python data source {@code tileflight.spark}.
 */
package io.tileflight.spark;
