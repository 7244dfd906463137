//! Creating the state table for local use (`sluice state init`); in AWS, Terraform
//! creates it with the same definition: `pk`/`sk` strings, on-demand billing, TTL on
//! `expires_at`.

use std::time::Duration;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType, TableStatus,
    TimeToLiveSpecification,
};

use super::DynamoStateStore;
use super::item::TTL_ATTRIBUTE;
use crate::error::{Code, Error, Result};

impl DynamoStateStore {
    /// Creates the table (`pk`/`sk` strings, on-demand billing, TTL on `expires_at`) when
    /// missing and waits until it is active. Idempotent.
    pub async fn create_table(&self) -> Result<bool> {
        let attribute = |name: &str| {
            AttributeDefinition::builder()
                .attribute_name(name)
                .attribute_type(ScalarAttributeType::S)
                .build()
                .map_err(|e| Error::new(Code::Internal, "building the table definition").source(e))
        };
        let key = |name: &str, kind| {
            KeySchemaElement::builder()
                .attribute_name(name)
                .key_type(kind)
                .build()
                .map_err(|e| Error::new(Code::Internal, "building the key schema").source(e))
        };
        let created = self
            .client
            .create_table()
            .table_name(&self.table)
            .attribute_definitions(attribute("pk")?)
            .attribute_definitions(attribute("sk")?)
            .key_schema(key("pk", KeyType::Hash)?)
            .key_schema(key("sk", KeyType::Range)?)
            .billing_mode(BillingMode::PayPerRequest)
            .send()
            .await;
        let created = match created {
            Ok(_) => true,
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_resource_in_use_exception()) =>
            {
                false
            }
            Err(e) => return Err(self.error(e, "dynamodb:CreateTable", "create table")),
        };
        self.wait_active().await?;
        self.ensure_ttl().await?;
        Ok(created)
    }

    async fn wait_active(&self) -> Result<()> {
        for _ in 0..120 {
            let described = self
                .client
                .describe_table()
                .table_name(&self.table)
                .send()
                .await
                .map_err(|e| self.error(e, "dynamodb:DescribeTable", "describe table"))?;
            let status = described.table.and_then(|t| t.table_status);
            if status == Some(TableStatus::Active) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        Err(Error::new(
            Code::StateUnavailable,
            format!(
                "DynamoDB table {} did not become ACTIVE within a minute",
                self.table
            ),
        )
        .hint("run `sluice state init` again once the table is active"))
    }

    async fn ensure_ttl(&self) -> Result<()> {
        let described = self
            .client
            .describe_time_to_live()
            .table_name(&self.table)
            .send()
            .await
            .map_err(|e| self.error(e, "dynamodb:DescribeTimeToLive", "describe TTL"))?;
        let current = described.time_to_live_description;
        let enabled = current.as_ref().is_some_and(|d| {
            d.attribute_name() == Some(TTL_ATTRIBUTE)
                && matches!(
                    d.time_to_live_status().map(|s| s.as_str()),
                    Some("ENABLED" | "ENABLING")
                )
        });
        if enabled {
            return Ok(());
        }
        let spec = TimeToLiveSpecification::builder()
            .attribute_name(TTL_ATTRIBUTE)
            .enabled(true)
            .build()
            .map_err(|e| Error::new(Code::Internal, "building the TTL spec").source(e))?;
        self.client
            .update_time_to_live()
            .table_name(&self.table)
            .time_to_live_specification(spec)
            .send()
            .await
            .map_err(|e| self.error(e, "dynamodb:UpdateTimeToLive", "enable TTL"))?;
        Ok(())
    }
}
