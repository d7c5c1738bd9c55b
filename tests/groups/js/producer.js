// An idempotent KafkaJS producer for the ride-through tests: sends "<name>-<n>" to partition n % partitions,
// one record at a time (acks=all) with a pause of pauseMs (default 20) after each, printing "K partition offset value" for each acknowledgement and
// "F value" for a send that failed after KafkaJS' own retries; stops on SIGTERM once the send in flight ends.
const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, topic, name, partitions, pauseMs] = process.argv.slice(2)
const kafka = new Kafka({ clientId: name, brokers: bootstrap.split(','), logLevel: logLevel.NOTHING,
  retry: { retries: 30, initialRetryTime: 100, maxRetryTime: 1000 } })
const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
const out = (line) => process.stdout.write(line + '\n')
let stopping = false
process.on('SIGTERM', () => { stopping = true })

async function main () {
  await producer.connect()
  for (let n = 0; !stopping; n++) {
    const value = `${name}-${String(n).padStart(8, '0')}`
    const partition = n % Number(partitions)
    try {
      const [meta] = await producer.send({ topic, acks: -1, messages: [{ value, partition }] })
      out(`K ${meta.partition} ${meta.baseOffset} ${value}`)
    } catch (e) {
      out(`F ${value}`)
    }
    await new Promise((resolve) => setTimeout(resolve, Number(pauseMs || 20)))
  }
  await producer.disconnect()
  out('BYE')
}
main().then(() => process.exit(0)).catch((e) => { out('ERR ' + e.message); process.exit(1) })
