//! Sending one call: the refusals checked first, the request over HTTP, its counting, the
//! answered-model rule, and the fail-fast stop of a model's lane.

use std::sync::atomic::Ordering;

use super::key::with_key;
use super::ledger::CallLedger;
use super::{Call, CallContext, budget, usage};
use crate::exec::step_error::StepError;
use crate::exec::substep::Fresh;
use crate::plan::StepKey;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;

use crate::providers::{Answered, CallError, CallOptions, CallRecord, ChatResponse, Endpoint, ResponseLedger, Shaping, answered_at};
use crate::spec::ModelConfig;

impl CallContext {
    /// The answer over HTTP, held to the answered-model rule; nothing is sent offline, after
    /// the cache disk filled, or once the model's lane stopped.
    /// `encoded` is the body's canonical encoding, sent as it is when nothing is added on
    /// the wire.
    pub(super) async fn answer(
        &self,
        call: &Call<'_>,
        (body, encoded): (serde_json::Value, Option<Vec<u8>>),
        ledger: Option<&CallLedger>,
    ) -> Result<Fresh<ChatResponse>, StepError> {
        let model = call.model;
        if self.offline {
            return Err(StepError::episode_msg(format!("--offline: call {} to `{}` is not in the cache", call.key.short(), model.model)));
        }
        if let Some(refusal) = self.lanes.refusal(&model.id, call.episode) {
            return Err(refusal);
        }
        let endpoint = with_key(call.endpoint.clone(), model)?;
        let base_price = self.price_of(model);
        let price = if call.batched { base_price.map(|price| price.batched()) } else { base_price };
        let hold = match &self.budget {
            Some(budget) => {
                let worst = budget::worst_case(model, base_price.as_ref(), call.endpoint.kind.protocol(), &body);
                // A batch's calls each hold their worst case at the batch price before joining it.
                let share = if call.batched { base_price.map_or(1.0, |price| price.batch_factor.unwrap_or(0.5)) } else { 1.0 };
                Some(budget.hold(budget::scaled(worst, share))?)
            }
            None => None,
        };
        let record = if call.batched {
            self.batch_record(call, &endpoint, body).await
        } else {
            let stop = self.lanes.switch(&model.id);
            let options = CallOptions { body: Some(body), encoded, ledger: ledger.map(|ledger| ledger as &dyn ResponseLedger), stop: Some(&stop) };
            self.client.call_with(&endpoint, call.request, options).await
        };
        if let Some(slots) = self.client.slot_news(&endpoint) {
            self.note(&format!(
                "note: model `{}`: its server has {slots} slot(s) (GET /props `total_slots`): at most {slots} of its requests are in flight at once (transport.server_slots)",
                model.id
            ));
        }
        // Held back at the moment of sending because the answers already passed the budget:
        // not sent, so not a failure of the call (the cell is not started, not failed).
        if let (Err(CallError::Halted { .. }), Some(budget)) = (&record.result, &self.budget)
            && budget.reached()
            && self.client.halted_reason().is_some_and(|reason| reason.starts_with(budget::PASSED))
        {
            return Err(StepError::Budget(format!("the budget of ${:.2} is passed (${:.4} spent): call not sent", budget.limit_usd(), budget.spent_usd())));
        }
        self.overbilled(model, &record, call.endpoint.kind.protocol());
        let stalls = self.usage.record(&record, price.as_ref());
        if call.batched {
            self.usage.record_batched(&record, base_price.as_ref());
        }
        if let Some(hold) = hold
            && let Some(reason) = hold.settle(budget::cost(&record, price.as_ref()))
        {
            // The budget is checked again when each held call would be sent: none is.
            let first = self.client.halted_reason().is_none();
            self.client.halt(&reason);
            if first {
                self.note(&format!("error: {reason}"));
            }
        }
        if stalls > 0 {
            self.note(&usage::stall_note(&model.id, stalls, &record, self.client.config().stream_idle_timeout));
        }
        let response = match record.result {
            Ok(response) => response,
            Err(error) => {
                let error = StepError::Call { error, attempts: record.attempts };
                self.lane_failed(model, call.episode, &error);
                return Err(error);
            }
        };
        if let Some(ledger) = ledger {
            ledger.answered();
        }
        self.accept(model, response, record.answered)
    }

    /// Counts an answer billed past its request's output cap, and says so once per run: the
    /// cost shown is what the provider billed, however implausible.
    fn overbilled(&self, model: &ModelConfig, record: &CallRecord, protocol: &dyn crate::providers::Protocol) {
        let Ok(response) = &record.result else { return };
        let cap = protocol.output_cap_fields().iter().find_map(|field| record.request_body.pointer(field).and_then(serde_json::Value::as_u64));
        if let Some(cap) = cap.filter(|cap| response.usage.output > *cap)
            && self.usage.overbilled_calls.fetch_add(1, Ordering::Relaxed) == 0
        {
            self.note(&format!(
                "warning: model `{}`: the provider billed {} output tokens for a call capped at {cap}; costs and the budget count what it billed",
                model.id, response.usage.output
            ));
        }
    }

    /// A batched call's answer as a live call's record: its response line read by the
    /// protocol exactly like a live response (a line the batch could not answer is an error,
    /// never cached).
    async fn batch_record(&self, call: &Call<'_>, endpoint: &Endpoint, body: serde_json::Value) -> CallRecord {
        let started = std::time::Instant::now();
        let mode = call.model.batch.unwrap_or_default();
        let line = self.batcher.ask(&self.client, &self.store, endpoint, mode, call.key, &body).await;
        let protocol = endpoint.kind.protocol();
        let shaping = Shaping::for_call(call.request, &endpoint.base_url);
        let result = match line {
            Ok((status, bytes)) => match protocol.parse(StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY), &HeaderMap::new(), &bytes, &shaping) {
                Ok(mut response) => {
                    // Its latency is the wait for its batch.
                    response.latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                    // Paid at the batch price: stored with the answer, so the report prices it so.
                    response.paid = Some(crate::providers::PAID_BATCH.to_owned());
                    Ok(protocol.settle(response, &shaping))
                }
                Err(CallError::ContextExceeded { message }) => Ok(ChatResponse::context_exceeded(message)),
                Err(error) => Err(error),
            },
            Err(message) => Err(CallError::Protocol { detail: format!("batch: {message}") }),
        };
        let answered = result.as_ref().map_or(Answered::Same, |response| answered_at(&endpoint.base_url, &endpoint.model, &response.answered_model));
        CallRecord { result, attempts: 1, failed_attempts: Vec::new(), request_body: body, elapsed: started.elapsed(), streamed: false, answered }
    }

    /// The answered-model rule: a dated snapshot of the alias is the model asked for (noted in
    /// the report's provenance), and so is a local server's model file; another model's
    /// answer is never scored silently, never cached, and stops the model's calls.
    fn accept(&self, model: &ModelConfig, response: ChatResponse, answered: Answered) -> Result<Fresh<ChatResponse>, StepError> {
        match answered {
            Answered::Same | Answered::Snapshot | Answered::ServedFile => {
                self.lanes.answered(&model.id);
                Ok(Fresh::cacheable(response))
            }
            Answered::Other if model.accept_other_model => {
                self.usage.other_model.fetch_add(1, Ordering::Relaxed);
                self.usage.other_model_cached.fetch_add(1, Ordering::Relaxed);
                Ok(Fresh::cacheable(response))
            }
            Answered::Other => {
                self.usage.other_model.fetch_add(1, Ordering::Relaxed);
                let reason = format!(
                    "the server answered with model `{}` when `{}` was asked for; set `accept_other_model: true` on model `{}` to score its answers",
                    response.answered_model, model.model, model.id
                );
                self.stop(model, &reason);
                Err(StepError::episode_msg(reason))
            }
        }
    }

    /// Stops `model`'s unsent calls when `error` is one every call of it would hit.
    pub(super) fn lane_failed(&self, model: &ModelConfig, episode: StepKey, error: &StepError) {
        if let Some(reason) = self.lanes.failed(&model.id, episode, error) {
            self.stop(model, &reason);
        }
    }

    /// Stops sending `model`'s calls (its cells fail with `reason`; other models go on), also
    /// those already waiting for a slot, and says so once in the run log.
    pub(super) fn stop(&self, model: &ModelConfig, reason: &str) {
        if self.lanes.switch(&model.id).stop(reason) {
            // Two notes, not one with a line break: each note is printed on one line with its
            // controls escaped, so an embedded `\n` would read as a literal `\x0a` (issue 48).
            self.note(&format!("error: model `{}`: {}", model.id, crate::text::one_line(reason)));
            self.note(
                "  every call of it would fail the same way, so its calls not yet sent are not sent (other models go on); `evalgrid check <pipeline>` tries each endpoint with one small request",
            );
        }
    }
}
